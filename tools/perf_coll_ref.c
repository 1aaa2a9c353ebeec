/* uccl_perf coll's second reference: Open MPI over UCX. An MPI job cannot
 * switch its PML, so rank 0 runs this program again under its own mpirun
 * with --mca pml ucx --mca osc ucx (any UCX transport and device) and
 * --ref-only (MPI column only, same sizes, iterations and rounds), while
 * the other ranks sleep, and reads the per-size times back from that
 * run's JSON. Where that job does not run (no UCX, no usable transport),
 * the reason is reported and the column stays empty. The inner job runs on
 * this host only: for ranks on several hosts the column is skipped. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "perf_coll.h"

#define REF_TIMEOUT_S 600
#define REF_MAX_ARGS 96

extern char **environ;

/* The launcher's own variables would make the inner mpirun think it runs
 * inside the outer job: drop them (the MCA settings of the outer job too). */
static void scrub_env(void)
{
    static const char *const prefixes[] = {"OMPI_", "PMIX_", "OPAL_", "ORTE_", "PRTE_"};
    bool again = true;

    while (again) {
        again = false;
        for (char **e = environ; e != NULL && *e != NULL; e++) {
            for (size_t p = 0; p < sizeof(prefixes) / sizeof(prefixes[0]); p++) {
                if (strncmp(*e, prefixes[p], strlen(prefixes[p])) == 0) {
                    char name[256];
                    size_t len = strcspn(*e, "=");
                    if (len >= sizeof(name))
                        continue;
                    memcpy(name, *e, len);
                    name[len] = '\0';
                    unsetenv(name);
                    again = true; /* environ changed under us */
                    break;
                }
            }
            if (again)
                break;
        }
    }
}

/* argv of the inner job: mpirun, its options, this program, the outer
 * arguments without --json/--ucx-*, then --ref-only --json FILE. */
static int build_argv(const perf_coll_ref_t *r, int argc, char **argv, const char *exe,
                      const char *json, char **out, char *tls_env, size_t tls_len)
{
    static char np[16];
    int k = 0;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);

    snprintf(np, sizeof(np), "%d", r->ranks);
    out[k++] = (char *)r->mpirun;
    if (getuid() == 0)
        out[k++] = "--allow-run-as-root";
    if (cpus >= 2L * r->ranks) {
        out[k++] = "--bind-to";
        out[k++] = "core";
    } else {
        out[k++] = "--oversubscribe";
        out[k++] = "--bind-to";
        out[k++] = "none";
    }
    out[k++] = "-np";
    out[k++] = np;
    /* plm isolated: every rank on this host, no rsh/ssh agent needed (the
     * outer job's settings that picked one are scrubbed) */
    static char *const mca[] = {"--mca", "plm", "isolated",
                                "--mca", "pml", "ucx", "--mca", "osc", "ucx",
                                "--mca", "pml_ucx_tls", "any", "--mca", "pml_ucx_devices", "any"};
    for (size_t i = 0; i < sizeof(mca) / sizeof(mca[0]); i++)
        out[k++] = mca[i];
    if (r->ucx_tls != NULL) {
        snprintf(tls_env, tls_len, "UCX_TLS=%s", r->ucx_tls);
        out[k++] = "-x";
        out[k++] = tls_env;
    }
    out[k++] = (char *)exe;
    out[k++] = "coll";
    for (int i = 2; i < argc && k < REF_MAX_ARGS - 6; i++) {
        if (strcmp(argv[i], "--json") == 0 || strcmp(argv[i], "--ucx-ref") == 0 ||
            strcmp(argv[i], "--ucx-tls") == 0 || strcmp(argv[i], "--mpirun") == 0) {
            i++; /* and its value */
            continue;
        }
        if (strncmp(argv[i], "--json=", 7) == 0 || strncmp(argv[i], "--ucx-", 6) == 0 ||
            strncmp(argv[i], "--mpirun=", 9) == 0)
            continue;
        out[k++] = argv[i];
    }
    out[k++] = "--ref-only";
    out[k++] = "--json";
    out[k++] = (char *)json;
    out[k] = NULL;
    return k;
}

/* Times per size from the inner run's JSON (one row a line). */
static int read_times(const char *json, const size_t *counts, double *us, int nrows)
{
    FILE *f = fopen(json, "r");
    char line[1024];
    int found = 0;

    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        const char *pc = strstr(line, "\"count\": "), *pm = strstr(line, "\"mpi_us\": ");
        size_t count;
        double t;
        if (pc == NULL || pm == NULL || sscanf(pc + 9, "%zu", &count) != 1 ||
            sscanf(pm + 10, "%lf", &t) != 1)
            continue;
        for (int i = 0; i < nrows; i++)
            if (counts[i] == count) {
                us[i] = t;
                found++;
            }
    }
    fclose(f);
    return found == nrows ? 0 : -1;
}

/* The last non-empty line of the inner job's output, as the reason. */
static void last_line(const char *log, char *why, size_t len)
{
    FILE *f = fopen(log, "r");
    char line[512];

    if (f == NULL)
        return;
    while (fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] != '\0' && strspn(line, "-* ") != strlen(line))
            snprintf(why, len, "%s", line);
    }
    fclose(f);
}

static int run_child(char **args, const char *log, char *why, size_t len)
{
    pid_t pid = fork();
    int status = 0;
    time_t deadline = time(NULL) + REF_TIMEOUT_S;

    if (pid < 0) {
        snprintf(why, len, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        scrub_env();
        execvp(args[0], args);
        fprintf(stderr, "cannot run %s: %s\n", args[0], strerror(errno));
        _exit(127);
    }
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR) {
            snprintf(why, len, "waitpid: %s", strerror(errno));
            return -1;
        }
        if (time(NULL) > deadline) {
            kill(pid, SIGTERM);
            waitpid(pid, &status, 0);
            snprintf(why, len, "the UCX job ran past %d s", REF_TIMEOUT_S);
            return -1;
        }
        usleep(10000);
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    snprintf(why, len, "exit status %d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    size_t used = strlen(why);
    if (used + 3 < len) {
        snprintf(why + used, len - used, ": ");
        last_line(log, why + used + 2, len - used - 2);
    }
    return -1;
}

int perf_coll_ucx_ref(const perf_coll_ref_t *r, int argc, char **argv, const size_t *counts,
                      double *us, int nrows, char *why, size_t why_len)
{
    char dir[] = "/tmp/uccl_perf_ucx.XXXXXX", json[96], log[96], exe[4096], tls[256];
    char *args[REF_MAX_ARGS];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    int rc;

    snprintf(why, why_len, "?");
    if (n <= 0) {
        snprintf(why, why_len, "cannot find this program (/proc/self/exe): %s", strerror(errno));
        return -1;
    }
    exe[n] = '\0';
    if (mkdtemp(dir) == NULL) {
        snprintf(why, why_len, "mkdtemp: %s", strerror(errno));
        return -1;
    }
    snprintf(json, sizeof(json), "%s/ucx.json", dir);
    snprintf(log, sizeof(log), "%s/ucx.log", dir);
    build_argv(r, argc, argv, exe, json, args, tls, sizeof(tls));
    rc = run_child(args, log, why, why_len);
    if (rc == 0 && (rc = read_times(json, counts, us, nrows)) != 0)
        snprintf(why, why_len, "the UCX job wrote no time for some size");
    unlink(json);
    unlink(log);
    rmdir(dir);
    return rc;
}
