/* Kept for the callers that include the core's "numfmt.h" by its old place (src/server, src/cli):
 * the declarations are public now, in perseus/numfmt.h. New code includes that. */
#ifndef PRS_NUMFMT_H
#define PRS_NUMFMT_H
#include "perseus/numfmt.h"
#endif
