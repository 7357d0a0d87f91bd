/* coll.h - helpers shared by the collective test programs: those of the
 * point-to-point tests, plus the per-rank contributions.  Expected values are
 * computed locally from the same formulas every rank uses for its
 * contribution (a sequential reference). */
#ifndef MADMPI_COLL_H
#define MADMPI_COLL_H

#include "../p2p/common.h"

/* The contribution of rank r at index i (salt s tells tests apart). */
static inline int val(int r, int i, int s)
{
    return (int)((r * 131 + i * 7 + s * 31) % 1000) - 300;
}

#endif
