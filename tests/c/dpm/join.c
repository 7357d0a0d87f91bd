/* join.c - MPI_Comm_join: ranks 2k and 2k+1 connect a TCP socket of their own
 * (the even one listens on the loopback, the odd one learns the port number
 * by MPI_Send), join over it, and use the intercommunicator (a message each
 * way, an allreduce, a merge); an odd rank left over only checks that a bad
 * descriptor is an error.
 */
#include "../p2p/common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    int partner = t_rank ^ 1;
    if (partner < t_size) {
        int fd;
        if (t_rank % 2 == 0) {
            int l = socket(AF_INET, SOCK_STREAM, 0);
            CHECK(l >= 0);
            struct sockaddr_in a = {0};
            a.sin_family = AF_INET;
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            CHECK(bind(l, (struct sockaddr *)&a, sizeof a) == 0);
            CHECK(listen(l, 1) == 0);
            socklen_t len = sizeof a;
            CHECK(getsockname(l, (struct sockaddr *)&a, &len) == 0);
            int p = ntohs(a.sin_port);
            MPI_OK(MPI_Send(&p, 1, MPI_INT, partner, 1, MPI_COMM_WORLD));
            fd = accept(l, NULL, NULL);
            CHECK(fd >= 0);
            close(l);
        } else {
            int p;
            MPI_OK(MPI_Recv(&p, 1, MPI_INT, partner, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            fd = socket(AF_INET, SOCK_STREAM, 0);
            struct sockaddr_in a = {0};
            a.sin_family = AF_INET;
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            a.sin_port = htons((unsigned short)p);
            CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
        }
        MPI_Comm inter;
        MPI_OK(MPI_Comm_join(fd, &inter));
        int n, flag;
        MPI_OK(MPI_Comm_test_inter(inter, &flag));
        CHECK(flag);
        MPI_OK(MPI_Comm_remote_size(inter, &n));
        CHECK(n == 1);
        int v = t_rank, got = -1;
        MPI_OK(MPI_Sendrecv(&v, 1, MPI_INT, 0, 3, &got, 1, MPI_INT, 0, 3, inter,
                            MPI_STATUS_IGNORE));
        CHECKF(got == partner, "got %d from the joined process", got);
        int sum = 0;
        MPI_OK(MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, inter));
        CHECK(sum == partner);
        MPI_Comm merged;
        MPI_OK(MPI_Intercomm_merge(inter, t_rank % 2, &merged));
        int mr;
        MPI_OK(MPI_Comm_rank(merged, &mr));
        CHECK(mr == t_rank % 2);
        MPI_OK(MPI_Comm_free(&merged));
        MPI_OK(MPI_Comm_disconnect(&inter));
        /* The socket is still the caller's. */
        CHECK(close(fd) == 0);
    }
    MPI_Comm c;
    EXPECT_CLASS(MPI_Comm_join(-1, &c), MPI_ERR_ARG);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    t_done("join");
    return 0;
}
