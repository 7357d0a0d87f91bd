/*
 * madeleine.h: Madeleine II's message construction over madmpi (see docs/madeleine.md).
 *
 * A message to one process of a channel is built by mad_begin_packing, one mad_pack per piece
 * of data and mad_end_packing; the receiver mirrors it with mad_begin_unpacking (or
 * mad_begin_unpacking_from), one mad_unpack per piece, in the same order, with the same sizes
 * and receive modes, and mad_end_unpacking.
 *
 * Send modes: mad_send_SAFER (the data is copied at once: the memory may change as soon as
 * mad_pack returns), mad_send_LATER (read at mad_end_packing: changes until then are sent),
 * mad_send_CHEAPER (the library's choice: leave the memory unchanged until mad_end_packing
 * returns). Receive modes: mad_receive_EXPRESS (in place when mad_unpack returns),
 * mad_receive_CHEAPER (in place after mad_end_unpacking; the memory must stay valid until then).
 *
 * Every function returns MPI_SUCCESS or an MPI error code, after calling the error handler of
 * the communicator the channel was opened on (MPI_ERRORS_ARE_FATAL by default). Handles that
 * are not (or no longer) valid give MPI_ERR_ARG; a receiver whose unpacking does not match the
 * packing gets MPI_ERR_TRUNCATE (the message is consumed, the channel stays usable).
 */
#ifndef MADMPI_MADELEINE_H
#define MADMPI_MADELEINE_H

#include <stddef.h>
#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mad_channel *mad_channel_t;       /* a closed world over a communicator's processes */
typedef struct mad_connection *mad_connection_t; /* one message being packed or unpacked */

#define mad_send_SAFER 0
#define mad_send_LATER 1
#define mad_send_CHEAPER 2
#define mad_receive_EXPRESS 0
#define mad_receive_CHEAPER 1

/* Collective over comm: the channel owns a duplicate of it. */
int mad_open_channel(MPI_Comm comm, mad_channel_t *channel);
/* Sets *channel to NULL. */
int mad_close_channel(mad_channel_t *channel);

int mad_begin_packing(mad_channel_t channel, int remote, mad_connection_t *connection);
int mad_pack(mad_connection_t connection, const void *data, size_t size, int send_mode,
             int receive_mode);
/* Sends the message; sets *connection to NULL. */
int mad_end_packing(mad_connection_t *connection);

/* The next message from any process of the channel. */
int mad_begin_unpacking(mad_channel_t channel, mad_connection_t *connection);
/* The next message from process remote of the channel. */
int mad_begin_unpacking_from(mad_channel_t channel, int remote, mad_connection_t *connection);
int mad_unpack(mad_connection_t connection, void *data, size_t size, int send_mode,
               int receive_mode);
/* Every piece is in place; sets *connection to NULL. */
int mad_end_unpacking(mad_connection_t *connection);

/* The rank in the channel of the message's sender (unpacking) or destination (packing). */
int mad_connection_remote(mad_connection_t connection, int *rank);

#ifdef __cplusplus
}
#endif

#endif /* MADMPI_MADELEINE_H */
