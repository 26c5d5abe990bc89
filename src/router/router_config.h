/* The router's configuration (router_config.c): the model clients ask for, the cost model of
 * its instances, DynamoLLM's request classes, and the pools with their instances, read from a
 * JSON file whose format docs/router.md describes. Every request class belongs to exactly one
 * pool; pools are listed from short requests to long ones (re-routing goes to the next). */
#ifndef PRS_ROUTER_CONFIG_H
#define PRS_ROUTER_CONFIG_H

#include <stddef.h>

#include "classes.h"
#include "oai_request.h"
#include "perseus/error.h"
#include "roofline.h"

#define PRS_ROUTER_MAX_POOLS PRS_INFER_NCLASS
#define PRS_ROUTER_MAX_INSTANCES 1024
#define PRS_ROUTER_NAME_MAX 64
#define PRS_ROUTER_URL_MAX 512
#define PRS_ROUTER_CONFIG_MAX_BYTES (1u << 20)

typedef struct prs_router_instance {
    char name[PRS_ROUTER_NAME_MAX];
    char url[PRS_ROUTER_URL_MAX]; /* base URL, "http://host:port" (no trailing slash) */
    int tp, mhz;                  /* its TP degree and SM clock, for the cost model */
    int max_running;              /* requests in flight beyond which it has no capacity */
    int pool;                     /* index of its pool */
} prs_router_instance;

typedef struct prs_router_pool {
    char name[PRS_ROUTER_NAME_MAX];
    int first, n; /* its instances: inst[first .. first + n - 1] */
} prs_router_pool;

/* Where the router reports its per-class loads (the "perseusd" key): perseusd's base URL, the
 * inference cluster's id and token (docs/api.md, "Inference clusters"). url[0] == 0: none. */
typedef struct prs_router_report {
    char url[PRS_ROUTER_URL_MAX];
    char cluster[PRS_ROUTER_NAME_MAX];
    char token[256];
    double period_s;   /* how often (default 30 s) */
    double rate_scale; /* the rates measured are divided by this (a replay's time scale) */
} prs_router_report;

typedef struct prs_router_config {
    char model[PRS_OAI_MODEL_MAX]; /* the model name clients send */
    prs_infer_roofline cost;
    prs_infer_classes classes;
    int pool_of_class[PRS_INFER_NCLASS];
    long default_out_tokens;  /* the predictor's guess before it has seen any request */
    size_t max_body_bytes;    /* request bodies over this are refused (413) */
    unsigned max_connections; /* client connections held at once */
    double backend_timeout_s; /* a backend silent for this long is given up */
    double client_timeout_s;  /* a client connection idle this long is closed */
    double down_s;            /* an instance that failed is skipped for this long */
    prs_router_pool pools[PRS_ROUTER_MAX_POOLS];
    int npools;
    prs_router_report report;
    prs_router_instance *inst; /* malloc'd, ninst entries */
    int ninst;
} prs_router_config;

/* Parse text[len] (JSON); name is used in messages. PRS_EPARSE (malformed JSON, with line) or
 * PRS_EINVAL (a field, named with its path, e.g. "pools[1].instances[0].tp") on failure. */
int prs__router_config_parse(const char *text, size_t len, const char *name, prs_router_config *out,
                             prs_error *err);
int prs__router_config_load(const char *path, prs_router_config *out, prs_error *err);
void prs__router_config_free(prs_router_config *c);

#endif
