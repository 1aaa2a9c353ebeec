/* Two-process bootstrap for the GPU tests (see boot.h). */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "uccl_build.h"
#include "boot.h"
#ifdef UCCL_HAVE_MPI
#include <mpi.h>
#endif

static int use_mpi;
static int sock_fd = -1;
static pid_t child_pid;

int boot_init(int *argc, char ***argv)
{
    int sv[2];

#ifdef UCCL_HAVE_MPI
    if (getenv("OMPI_COMM_WORLD_SIZE") != NULL || getenv("PMI_SIZE") != NULL) {
        int rank, size;
        MPI_Init(argc, argv);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        if (size != 2) {
            fprintf(stderr, "run with exactly 2 ranks\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        use_mpi = 1;
        return rank;
    }
#else
    (void)argc;
    (void)argv;
#endif
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        return -1;
    fflush(stdout);
    child_pid = fork();
    if (child_pid < 0)
        return -1;
    sock_fd = child_pid == 0 ? sv[1] : sv[0];
    close(child_pid == 0 ? sv[0] : sv[1]);
    return child_pid == 0 ? 1 : 0;
}

static int sock_xchg(uccl_engine_t *engine, const void *mine, void *theirs, size_t len)
{
    size_t got = 0;

    if (write(sock_fd, mine, len) != (ssize_t)len)
        return -1;
    while (got < len) {
        struct pollfd p = {sock_fd, POLLIN, 0};
        ssize_t n;
        if (engine != NULL)
            uccl_engine_progress(engine);
        if (poll(&p, 1, engine ? 0 : 100) <= 0)
            continue;
        n = read(sock_fd, (char *)theirs + got, len - got);
        if (n <= 0)
            return -1;
        got += (size_t)n;
    }
    return 0;
}

int boot_xchg(uccl_engine_t *engine, const void *mine, void *theirs, size_t len)
{
#ifdef UCCL_HAVE_MPI
    if (use_mpi) {
        MPI_Request r[2];
        int rank, peer, done = 0;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        peer = 1 - rank;
        MPI_Irecv(theirs, (int)len, MPI_BYTE, peer, 7, MPI_COMM_WORLD, &r[0]);
        MPI_Isend((void *)mine, (int)len, MPI_BYTE, peer, 7, MPI_COMM_WORLD, &r[1]);
        while (!done) {
            if (engine != NULL)
                uccl_engine_progress(engine);
            MPI_Testall(2, r, &done, MPI_STATUSES_IGNORE);
        }
        return 0;
    }
#endif
    return sock_xchg(engine, mine, theirs, len);
}

int boot_barrier(uccl_engine_t *engine)
{
    char a = 1, b;

    return boot_xchg(engine, &a, &b, 1);
}

int boot_finish(int rc)
{
    int other = 0, st;

    boot_xchg(NULL, &rc, &other, sizeof(rc));
#ifdef UCCL_HAVE_MPI
    if (use_mpi) {
        MPI_Finalize();
        return rc != 0 ? rc : other;
    }
#endif
    close(sock_fd);
    if (child_pid > 0 && waitpid(child_pid, &st, 0) == child_pid && !(WIFEXITED(st) && WEXITSTATUS(st) == 0) && rc == 0)
        rc = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    if (child_pid == 0)
        exit(rc); /* not _exit: the leak checker runs in this process too */
    return rc != 0 ? rc : other;
}
