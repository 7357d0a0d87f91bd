/* The second program of an MPMD job: mpmd.c under another role (see there). */
#define ROLE "peer"
#include "mpmd.c"
