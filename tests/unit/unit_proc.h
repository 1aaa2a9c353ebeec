/* What a test reads of its own process in /proc: resident memory and open
 * file descriptors. Header-only and without CUnit, so that the CUnit
 * programs (through unit.h), the fault and soak suites and the benchmarks
 * of tests/perf (b_comm_init, built by mpicc alone) read them one way. */
#ifndef UCCL_TESTS_UNIT_PROC_H
#define UCCL_TESTS_UNIT_PROC_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* This process's resident set in KiB (/proc/self/status VmRSS), -1 if unread. */
static inline long unit_rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;

    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, "VmRSS:", 6) == 0)
            v = atol(line + 6);
    if (f != NULL)
        fclose(f);
    return v;
}

/* Open file descriptors of this process (/proc/self/fd, less the one that
 * reads it); -1 when /proc cannot be read. */
static inline int unit_fd_count(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *ent;
    int n = 0;

    if (d == NULL)
        return -1;
    while ((ent = readdir(d)) != NULL)
        if (ent->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1;
}

#endif
