/* perseusd: the Perseus control plane (docs/server.md). Parses the command line, starts the
 * server (perseus/server.h) and waits for SIGTERM or SIGINT, then shuts down cleanly: requests in
 * flight finish, planner threads are joined, the database is closed. */
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "perseus/limits.h"
#include "perseus/logfmt.h"
#include "perseus/numfmt.h"
#include "perseus/server.h"
#include "suggest.h"

#ifndef PRS_VERSION
#define PRS_VERSION "0"
#endif

static const char usage[] =
    "usage: perseusd [--listen HOST:PORT] [--data-dir DIR] [--db FILE] [options]\n"
    "\n"
    "The Perseus control plane: registers the ranks of training jobs, sweeps GPU clocks to\n"
    "profile them, plans, serves each rank its clocks and reacts to stragglers (API v1:\n"
    "docs/api.md). All state is in a SQLite database; a restarted server resumes every job.\n"
    "\n"
    "  --listen HOST:PORT     IPv4 address or host name (resolved to its first IPv4\n"
    "                         address) and port (default 127.0.0.1:7787; port 0 picks a\n"
    "                         free one, see --port-file)\n"
    "  --data-dir DIR         data directory, created if missing (default: $STATE_DIRECTORY\n"
    "                         under systemd, else $XDG_STATE_HOME/perseusd, else\n"
    "                         ~/.local/state/perseusd)\n"
    "  --db FILE              database file (default DIR/perseusd.db)\n"
    "  --port-file FILE       write the port listened on to FILE once serving\n"
    "  --max-body BYTES       largest JSON request body (default 1048576)\n"
    "  --max-profile BYTES    largest uploaded profile CSV (default 16777216)\n"
    "  --max-connections N    concurrent connections over every thread (default 8192); a\n"
    "                         connection past it gets 503 to its request at once\n"
    "  --max-client-connections N  connections from one IP address (default 2048)\n"
    "  --idle-timeout DURATION  close a connection that sends no complete request headers\n"
    "                         this long after opening or its last answer (default 30s)\n"
    "  --request-timeout DURATION  close a request whose body and answer take longer\n"
    "                         (default 120s)\n"
    "  --threads N            HTTP worker threads (default: one per online CPU, at most 16)\n"
    "  --sync normal|full     full: fsync every commit, surviving power loss (default normal:\n"
    "                         every acknowledged request survives a crash of the process)\n"
    "  --create-token TOKEN   secret that job creation (POST /v1/jobs) must present as its\n"
    "                         bearer token; required when listening beyond loopback\n"
    "  --create-token-file FILE  the same, read from the first line of FILE (not visible in\n"
    "                         the process list)\n"
    "  --admin-token TOKEN    secret whose bearer may delete any job (DELETE /v1/jobs/ID)\n"
    "  --admin-token-file FILE  the same, read from the first line of FILE\n"
    "  --metrics-token TOKEN  secret that GET /metrics must present as its bearer token;\n"
    "                         without one, the per-job series are left out beyond loopback\n"
    "  --metrics-token-file FILE  the same, read from the first line of FILE\n"
    "  --tls-cert FILE        serve HTTPS with this PEM certificate (chain); clients then use\n"
    "                         https:// URLs (and a CA bundle that signed it)\n"
    "  --tls-key FILE         the certificate's PEM private key (with --tls-cert)\n"
    "  --max-jobs N           jobs held at once, finished ones included (default 1024)\n"
    "  --max-world N          ranks of one job (default 65536)\n"
    "  --max-ranks N          ranks of all jobs together (default 262144)\n"
    "  --retention DURATION   delete finished (done or failed) jobs this long after they\n"
    "                         finished: N[s|m|h|d] or 'never' (default 7d)\n"
    "  --job-idle-timeout DURATION  delete an unfinished job that no request reached this\n"
    "                         long: N[s|m|h|d] or 'never' (default 1d)\n"
    "  --max-planners N       planner threads at once; more plannings wait (default 2)\n"
    "  --plan-timeout DURATION  a planning running longer fails its job: N[s|m|h|d]\n"
    "                         (default 10m)\n"
    "  --max-plan-points N    refuse a problem whose frontier could have more points\n"
    "                         (default 1000000)\n"
    "  --change-cost-us US    the time a clock change adds before the computation that\n"
    "                         needs it, which the planner charges, for jobs whose spec gives\n"
    "                         no change_cost_us (default 0: changes are free)\n"
    "  --max-plan-memory BYTES  the planners' memory: a problem whose planner could take\n"
    "                         more (its estimate: the schedule graph, the tables, the\n"
    "                         frontier) is refused; plannings that fit alone wait until they\n"
    "                         fit beside the running ones (default 1073741824)\n"
    "  --log-level LEVEL      what to log, each level adding to the one after it: debug\n"
    "                         (every request), info (job events; the default), warn (failed\n"
    "                         requests and plannings) or error (server faults); logs are\n"
    "                         key=value lines on stderr\n"
    "  --zeus-compat          also serve the routes of Zeus's pipeline-frequency clients\n"
    "                         (the SOSP'24 artifact's and Zeus master's; docs/api.md), to\n"
    "                         loopback clients only\n"
    "  --zeus-prefix SECRET   serve them to any client under /SECRET/ (16..128 letters,\n"
    "                         digits, '-', '_'): Zeus clients send no token\n"
    "  --zeus-microbatches N  microbatches of Zeus jobs whose clients do not say\n"
    "  --zeus-min-clock MHZ   lowest clock Zeus jobs profile (default: the lowest listed)\n"
    "  --zeus-blocking-power W  blocking power Zeus jobs plan with (default: measured)\n"
    "  --zeus-profile FILE    stage profile CSV for Zeus jobs whose clients post no results\n"
    "                         (Zeus master's): they run the fastest plan of it\n"
    "  --zeus-profile-only    end Zeus jobs after profiling ([profiling-done]), as the\n"
    "                         artifact's profiler does\n"
    "  --version              print the version and exit\n"
    "  -h, --help             this help\n"
    "\n"
    "examples:\n"
    "  perseusd\n"
    "  perseusd --listen localhost:7787 --data-dir /var/lib/perseusd --log-level debug\n"
    "  perseusd --listen 0.0.0.0:7787 --create-token-file /etc/perseus/create-token --sync full\n";

static int bad(const char *msg, const char *arg)
{
    fprintf(stderr, "perseusd: %s '%s'\n%s", msg, arg, "try 'perseusd --help'\n");
    return 2;
}

/* "unknown option", with the option meant when one is close ("did you mean"). */
static int unknown_option(const char *arg, const struct option *opts)
{
    const char *names[64];
    char want[96];
    size_t n = 0;
    for (const struct option *o = opts; o->name && n < sizeof names / sizeof names[0]; o++)
        names[n++] = o->name;
    const char *word = strncmp(arg, "--", 2) == 0 ? arg + 2 : arg;
    snprintf(want, sizeof want, "%.*s", (int)strcspn(word, "="), word);
    const char *near = word != arg ? prs__suggest(want, names, n) : NULL;
    if (near)
        fprintf(stderr, "perseusd: unknown option '%s' (did you mean '--%s'?)\n", arg, near);
    else
        fprintf(stderr, "perseusd: unknown option '%s'\ntry 'perseusd --help'\n", arg);
    return 2;
}

/* Resolves HOST (an IPv4 address or a host name) to its first IPv4 address, written in dotted
 * form into out (INET_ADDRSTRLEN bytes). Returns 0, or a getaddrinfo error code. */
static int resolve_ipv4(const char *host, char *out)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0) return rc;
    const struct sockaddr_in *a = (const struct sockaddr_in *)(const void *)res->ai_addr;
    if (!inet_ntop(AF_INET, &a->sin_addr, out, INET_ADDRSTRLEN)) rc = EAI_FAIL;
    freeaddrinfo(res);
    return rc;
}

static int parse_size(const char *v, size_t *out)
{
    long n;
    if (prs_num_parse_long(v, &n) != 0 || n < 1) return -1;
    *out = (size_t)n;
    return 0;
}

/* N[s|m|h|d] (seconds by default) or "never" (-1) into *out; -1 when malformed. */
static int parse_duration(const char *v, double *out)
{
    if (strcmp(v, "never") == 0) {
        *out = -1;
        return 0;
    }
    char num[64];
    size_t n = strlen(v);
    double unit = 1;
    if (n > 0 && strchr("smhd", v[n - 1])) {
        unit = v[n - 1] == 'm' ? 60 : v[n - 1] == 'h' ? 3600 : v[n - 1] == 'd' ? 86400 : 1;
        n--;
    }
    if (n == 0 || n >= sizeof num) return -1;
    memcpy(num, v, n);
    num[n] = '\0';
    double x;
    if (prs_num_parse_double(num, &x) != 0 || !(x >= 0) || x > 1e9) return -1;
    *out = x * unit;
    return 0;
}

/* The first line of FILE into tok (a token); NULL when unreadable or empty. */
static const char *read_token_file(const char *path, char tok[512])
{
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char *line = fgets(tok, 512, f);
    fclose(f);
    if (!line) return NULL;
    tok[strcspn(tok, "\r\n")] = '\0';
    return tok[0] ? tok : NULL;
}

static int parse_count(const char *v, long max, long *out)
{
    size_t n;
    if (parse_size(v, &n) || (long)n > max) return -1;
    *out = (long)n;
    return 0;
}

/* --listen HOST:PORT into cfg: -1 to go on, or the exit status. */
static int parse_listen(const char *arg, prs_server_config *cfg)
{
    static char host[256], addr[INET_ADDRSTRLEN];
    const char *colon = strrchr(arg, ':');
    int port;
    if (!colon || (size_t)(colon - arg) >= sizeof host || colon == arg ||
        prs_num_parse_int(colon + 1, &port) != 0 || port < 0 || port > 65535)
        return bad("--listen: expected HOST:PORT, got", arg);
    memcpy(host, arg, (size_t)(colon - arg));
    host[colon - arg] = '\0';
    int rc = resolve_ipv4(host, addr);
    if (rc != 0) {
        fprintf(stderr, "perseusd: --listen: cannot resolve '%s' to an IPv4 address: %s\n", host,
                rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
        fputs("try 'perseusd --help'\n", stderr);
        return 2;
    }
    cfg->listen_host = addr;
    cfg->port = port;
    return -1;
}

/* What the command line names besides the server configuration. */
typedef struct args {
    const char *data_dir, *db, *port_file;
} args;

/* What a group of options answers for an option it does not handle. */
#define NOT_MINE (-2)

/* The size and count limits: -1 to go on, the exit status, or NOT_MINE. */
static int parse_limit(int c, prs_server_config *cfg)
{
    size_t n;
    long count;
    switch (c) {
    case 'm':
        if (parse_size(optarg, &cfg->max_body_bytes)) return bad("--max-body: bad size", optarg);
        return -1;
    case 'P':
        if (parse_size(optarg, &cfg->max_profile_bytes))
            return bad("--max-profile: bad size", optarg);
        return -1;
    case 'c':
        if (parse_size(optarg, &n) || n > 1000000)
            return bad("--max-connections: bad count", optarg);
        cfg->max_connections = (unsigned)n;
        return -1;
    case 't':
        if (parse_size(optarg, &n) || n > 256) return bad("--threads: bad count", optarg);
        cfg->threads = (unsigned)n;
        return -1;
    case 'J':
        if (parse_count(optarg, 1000000, &cfg->max_jobs))
            return bad("--max-jobs: bad count", optarg);
        return -1;
    case 'W':
        if (parse_count(optarg, 65536, &cfg->max_world))
            return bad("--max-world: expected a count in 1..65536, got", optarg);
        return -1;
    case 'R':
        if (parse_count(optarg, 100000000, &cfg->max_ranks))
            return bad("--max-ranks: bad count", optarg);
        return -1;
    case 'N':
        if (parse_count(optarg, 1024, &cfg->max_planners))
            return bad("--max-planners: expected a count in 1..1024, got", optarg);
        return -1;
    case 'Q':
        if (parse_count(optarg, PRS_MAX_FRONTIER_POINTS, &cfg->max_plan_points))
            return bad("--max-plan-points: expected a count up to 100000000, got", optarg);
        return -1;
    case 'M':
        if (parse_size(optarg, &cfg->max_plan_memory))
            return bad("--max-plan-memory: bad size", optarg);
        return -1;
    case 'u':
        if (prs_num_parse_double(optarg, &cfg->change_cost_us) != 0 ||
            !(cfg->change_cost_us >= 0 && cfg->change_cost_us <= PRS_MAX_CHANGE_COST_S * 1e6))
            return bad("--change-cost-us: expected microseconds from 0 to 100000, got", optarg);
        return -1;
    case 'C':
        if (parse_count(optarg, 1000000, &count))
            return bad("--max-client-connections: bad count", optarg);
        cfg->max_client_connections = (unsigned)count;
        return -1;
    default:
        return NOT_MINE;
    }
}

/* The durations: -1 to go on, the exit status, or NOT_MINE. */
static int parse_timeout(int c, prs_server_config *cfg)
{
    switch (c) {
    case 'j':
        if (parse_duration(optarg, &cfg->job_idle_timeout_s) || cfg->job_idle_timeout_s == 0)
            return bad("--job-idle-timeout: expected N[s|m|h|d] > 0 or never, got", optarg);
        return -1;
    case 'r':
        if (parse_duration(optarg, &cfg->retention_s))
            return bad("--retention: expected N[s|m|h|d] or never, got", optarg);
        return -1;
    case 'T':
        if (parse_duration(optarg, &cfg->plan_timeout_s) || !(cfg->plan_timeout_s > 0))
            return bad("--plan-timeout: expected N[s|m|h|d] > 0, got", optarg);
        return -1;
    case 'I':
        if (parse_duration(optarg, &cfg->idle_timeout_s) || !(cfg->idle_timeout_s > 0))
            return bad("--idle-timeout: expected N[s|m|h|d] > 0, got", optarg);
        return -1;
    case 'O':
        if (parse_duration(optarg, &cfg->request_timeout_s) || !(cfg->request_timeout_s > 0))
            return bad("--request-timeout: expected N[s|m|h|d] > 0, got", optarg);
        return -1;
    default:
        return NOT_MINE;
    }
}

/* --NAME-token T, or --NAME-token-file FILE (from_file; its token kept in buf), into *dst: -1 to
 * go on, or the exit status. */
static int token_option(const char *name, int from_file, const char **dst, char buf[512])
{
    char what[64];
    if (from_file) {
        snprintf(what, sizeof what, "--%s-token-file: cannot read a token from", name);
        if (!(*dst = read_token_file(optarg, buf))) return bad(what, optarg);
        return -1;
    }
    snprintf(what, sizeof what, "--%s-token: empty token", name);
    if (!optarg[0]) return bad(what, optarg);
    *dst = optarg;
    return -1;
}

/* The tokens: -1 to go on, the exit status, or NOT_MINE. */
static int parse_token(int c, prs_server_config *cfg)
{
    static char create[512], admin[512], metrics[512];
    switch (c) {
    case 'k':
    case 'K':
        return token_option("create", c == 'K', &cfg->create_token, create);
    case 'a':
    case 'A':
        return token_option("admin", c == 'A', &cfg->admin_token, admin);
    case 'x':
    case 'X':
        return token_option("metrics", c == 'X', &cfg->metrics_token, metrics);
    default:
        return NOT_MINE;
    }
}

/* The options of the Zeus-compatible routes (docs/api.md), '1'..'7': -1 to go on, or 2. */
static int parse_zeus_option(int c, prs_server_config *cfg)
{
    double w;
    switch (c) {
    case '1':
        cfg->zeus.enabled = 1;
        break;
    case '2':
        cfg->zeus.prefix = optarg;
        break;
    case '3':
        if (parse_count(optarg, 4096, &cfg->zeus.microbatches))
            return bad("--zeus-microbatches: expected a count in 1..4096, got", optarg);
        break;
    case '4':
        if (parse_count(optarg, 100000, &cfg->zeus.min_clock_mhz))
            return bad("--zeus-min-clock: expected MHz in 1..100000, got", optarg);
        break;
    case '5':
        if (prs_num_parse_double(optarg, &w) != 0 || !(w > 0) || w > 1e4)
            return bad("--zeus-blocking-power: expected watts > 0, got", optarg);
        cfg->zeus.blocking_power_w = w;
        break;
    case '6':
        cfg->zeus.profile_path = optarg;
        break;
    default:
        cfg->zeus.profile_only = 1;
        break;
    }
    return -1;
}

/* One option c (its value in optarg): -1 to go on, or the exit status. */
static int parse_option(int c, prs_server_config *cfg, args *a)
{
    int rc;
    if (c >= '1' && c <= '7') return parse_zeus_option(c, cfg);
    if ((rc = parse_limit(c, cfg)) != NOT_MINE || (rc = parse_timeout(c, cfg)) != NOT_MINE ||
        (rc = parse_token(c, cfg)) != NOT_MINE)
        return rc;
    switch (c) {
    case 'l':
        return parse_listen(optarg, cfg);
    case 'd':
        a->data_dir = optarg;
        break;
    case 'b':
        a->db = optarg;
        break;
    case 'p':
        a->port_file = optarg;
        break;
    case 's':
        if (strcmp(optarg, "full") == 0)
            cfg->sync_full = 1;
        else if (strcmp(optarg, "normal") == 0)
            cfg->sync_full = 0;
        else
            return bad("--sync: expected normal or full, got", optarg);
        break;
    case 'L':
        if (strcmp(optarg, "error") == 0)
            cfg->log_level = PRS_LOG_ERROR;
        else if (strcmp(optarg, "warn") == 0)
            cfg->log_level = PRS_LOG_WARN;
        else if (strcmp(optarg, "info") == 0)
            cfg->log_level = PRS_LOG_INFO;
        else if (strcmp(optarg, "debug") == 0)
            cfg->log_level = PRS_LOG_DEBUG;
        else
            return bad("--log-level: expected debug, info, warn or error, got", optarg);
        break;
    case 'e':
        cfg->tls_cert_file = optarg;
        break;
    case 'E':
        cfg->tls_key_file = optarg;
        break;
    case 'h':
        fputs(usage, stdout);
        return 0;
    case 'V':
        puts("perseusd " PRS_VERSION);
        return 0;
    default:
        fputs("try 'perseusd --help'\n", stderr);
        return 2;
    }
    return -1;
}

/* The command line into cfg and a: -1 to go on, or the exit status. */
static int parse_args(int argc, char **argv, prs_server_config *cfg, args *a)
{
    static const struct option opts[] = {{"listen", required_argument, NULL, 'l'},
                                         {"data-dir", required_argument, NULL, 'd'},
                                         {"db", required_argument, NULL, 'b'},
                                         {"port-file", required_argument, NULL, 'p'},
                                         {"max-body", required_argument, NULL, 'm'},
                                         {"max-profile", required_argument, NULL, 'P'},
                                         {"max-connections", required_argument, NULL, 'c'},
                                         {"threads", required_argument, NULL, 't'},
                                         {"sync", required_argument, NULL, 's'},
                                         {"log-level", required_argument, NULL, 'L'},
                                         {"create-token", required_argument, NULL, 'k'},
                                         {"create-token-file", required_argument, NULL, 'K'},
                                         {"admin-token", required_argument, NULL, 'a'},
                                         {"admin-token-file", required_argument, NULL, 'A'},
                                         {"job-idle-timeout", required_argument, NULL, 'j'},
                                         {"metrics-token", required_argument, NULL, 'x'},
                                         {"metrics-token-file", required_argument, NULL, 'X'},
                                         {"tls-cert", required_argument, NULL, 'e'},
                                         {"tls-key", required_argument, NULL, 'E'},
                                         {"max-jobs", required_argument, NULL, 'J'},
                                         {"max-world", required_argument, NULL, 'W'},
                                         {"max-ranks", required_argument, NULL, 'R'},
                                         {"retention", required_argument, NULL, 'r'},
                                         {"max-planners", required_argument, NULL, 'N'},
                                         {"max-client-connections", required_argument, NULL, 'C'},
                                         {"idle-timeout", required_argument, NULL, 'I'},
                                         {"request-timeout", required_argument, NULL, 'O'},
                                         {"plan-timeout", required_argument, NULL, 'T'},
                                         {"max-plan-points", required_argument, NULL, 'Q'},
                                         {"max-plan-memory", required_argument, NULL, 'M'},
                                         {"change-cost-us", required_argument, NULL, 'u'},
                                         {"zeus-compat", no_argument, NULL, '1'},
                                         {"zeus-prefix", required_argument, NULL, '2'},
                                         {"zeus-microbatches", required_argument, NULL, '3'},
                                         {"zeus-min-clock", required_argument, NULL, '4'},
                                         {"zeus-blocking-power", required_argument, NULL, '5'},
                                         {"zeus-profile", required_argument, NULL, '6'},
                                         {"zeus-profile-only", no_argument, NULL, '7'},
                                         {"version", no_argument, NULL, 'V'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int c, rc;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (c == ':') return bad("missing value for", argv[optind - 1]);
        if (c == '?') return unknown_option(argv[optind - 1], opts);
        if ((rc = parse_option(c, cfg, a)) >= 0) return rc;
    }
    if (optind < argc) return bad("unexpected argument", argv[optind]);
    if (!cfg->zeus.enabled &&
        (cfg->zeus.prefix || cfg->zeus.microbatches || cfg->zeus.min_clock_mhz ||
         cfg->zeus.blocking_power_w > 0 || cfg->zeus.profile_path || cfg->zeus.profile_only))
        return bad("the --zeus-* options need", "--zeus-compat");
    static char dbpath[4096];
    if (!a->db) {
        if ((size_t)snprintf(dbpath, sizeof dbpath, "%s/perseusd.db", a->data_dir) >= sizeof dbpath)
            return bad("--data-dir: path too long", a->data_dir);
        a->db = dbpath;
    }
    cfg->data_dir = a->data_dir;
    cfg->db_path = a->db;
    return -1;
}

/* The port listened on into port_file, written under a temporary name and renamed into place
 * so that a reader never sees half of it. 0, or -1 with a message on stderr. */
static int write_port_file(const char *port_file, int port)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", port_file);
    FILE *f = fopen(tmp, "w");
    if (!f || fprintf(f, "%d\n", port) < 0 || fclose(f) != 0 || rename(tmp, port_file) != 0) {
        fprintf(stderr, "perseusd: %s: cannot write port file\n", port_file);
        return -1;
    }
    return 0;
}

static void log_line(const char *level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_line(const char *level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    prs_logfmt_write(2, level, fmt, ap);
    va_end(ap);
}

/* The data directory when --data-dir is not given, never one relative to wherever the server
 * was started: the service's state directory (systemd's StateDirectory= sets STATE_DIRECTORY),
 * else the user's state home (the XDG base directory rules), else ./perseusd-data when there is
 * no home at all. */
static const char *default_data_dir(char *buf, size_t n)
{
    const char *sd = getenv("STATE_DIRECTORY"), *xdg = getenv("XDG_STATE_HOME");
    const char *home = getenv("HOME");
    if (sd && sd[0] == '/')
        snprintf(buf, n, "%.*s", (int)strcspn(sd, ":"), sd); /* the first, when several */
    else if (xdg && xdg[0] == '/')
        snprintf(buf, n, "%s/perseusd", xdg);
    else if (home && home[0] == '/')
        snprintf(buf, n, "%s/.local/state/perseusd", home);
    else
        snprintf(buf, n, "perseusd-data");
    return buf;
}

/* Why the server could not start, as a log line like every other it writes (logfmt on stderr):
 * the message quoted, its quotes and backslashes escaped. */
static void start_failed(const char *msg)
{
    char q[2 * PRS_ERRMSG_MAX];
    size_t k = 0;
    for (const char *p = msg; *p && k + 2 < sizeof q; p++) {
        if (*p == '"' || *p == '\\') q[k++] = '\\';
        q[k++] = *p == '\n' ? ' ' : *p;
    }
    q[k] = '\0';
    log_line("error", "msg=start_failed version=%s detail=\"%s\"", PRS_VERSION, q);
}

int main(int argc, char **argv)
{
    prs_server_config cfg;
    prs_server_config_default(&cfg);
    static char data_dir[4096];
    args a = {default_data_dir(data_dir, sizeof data_dir), NULL, NULL};
    int rc = parse_args(argc, argv, &cfg, &a);
    if (rc >= 0) return rc;

    /* Room for every connection the server allows, plus the database and logs. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    /* Block the shutdown signals in every thread; this one waits for them below. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    prs_server *s = NULL;
    prs_error err = {0, ""};
    if (prs_server_start(&cfg, &s, &err) != 0) {
        start_failed(err.msg);
        return 1;
    }
    if (a.port_file && write_port_file(a.port_file, prs_server_port(s)) != 0) {
        prs_server_stop(s);
        return 1;
    }
    int sig = 0;
    while (sigwait(&set, &sig) != 0) {
    }
    prs_server_stop(s);
    return 0;
}
