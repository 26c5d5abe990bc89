/* The process metrics of perseusd (metrics.h). */
#include "metrics.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#ifndef PRS_VERSION
#define PRS_VERSION "unknown"
#endif

void prs__metrics_build_info(FILE *f)
{
    fprintf(f,
            "# HELP perseusd_build_info The perseusd version, as a label; the value is 1.\n"
            "# TYPE perseusd_build_info gauge\nperseusd_build_info{version=\"%s\"} 1\n",
            PRS_VERSION);
}

/* Entries of /proc/self/fd (less the directory's own descriptor), or -1. */
static long open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    long n = 0;
    for (struct dirent *e = readdir(d); e; e = readdir(d))
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n - 1;
}

/* The process's start as Unix time: the boot time plus field 22 of /proc/self/stat (clock
 * ticks after boot); -1 when unreadable. */
static double start_time_s(void)
{
    FILE *st = fopen("/proc/self/stat", "r");
    if (!st) return -1;
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, st);
    fclose(st);
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    if (!p) return -1;
    unsigned long long ticks = 0;
    /* after ')': state (field 3) ... starttime (field 22) */
    if (sscanf(p + 2,
               "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d "
               "%*d %llu",
               &ticks) != 1)
        return -1;
    FILE *s = fopen("/proc/stat", "r");
    if (!s) return -1;
    char line[256];
    long long btime = -1;
    while (fgets(line, sizeof line, s))
        if (sscanf(line, "btime %lld", &btime) == 1) break;
    fclose(s);
    long hz = sysconf(_SC_CLK_TCK);
    if (btime < 0 || hz <= 0) return -1;
    return (double)btime + (double)ticks / (double)hz;
}

void prs__metrics_process(FILE *f)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        fprintf(f,
                "# HELP process_cpu_seconds_total CPU time of perseusd (user plus system), in "
                "seconds.\n# TYPE process_cpu_seconds_total counter\n"
                "process_cpu_seconds_total %.6f\n",
                (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
                    (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec);
    FILE *sm = fopen("/proc/self/statm", "r");
    unsigned long long vm_pages, rss_pages;
    long page = sysconf(_SC_PAGESIZE);
    if (sm && fscanf(sm, "%llu %llu", &vm_pages, &rss_pages) == 2 && page > 0)
        fprintf(
            f,
            "# HELP process_resident_memory_bytes Memory of perseusd resident in RAM, in bytes.\n"
            "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes "
            "%llu\n# HELP process_virtual_memory_bytes Address space of perseusd, in bytes.\n"
            "# TYPE process_virtual_memory_bytes gauge\nprocess_virtual_memory_bytes %llu\n",
            rss_pages * (unsigned long long)page, vm_pages * (unsigned long long)page);
    if (sm) fclose(sm);
    long fds = open_fds();
    if (fds >= 0)
        fprintf(f,
                "# HELP process_open_fds File descriptors perseusd holds open.\n"
                "# TYPE process_open_fds gauge\nprocess_open_fds %ld\n",
                fds);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        fprintf(f,
                "# HELP process_max_fds Limit on the file descriptors perseusd may open.\n"
                "# TYPE process_max_fds gauge\nprocess_max_fds %llu\n",
                (unsigned long long)rl.rlim_cur);
    double start = start_time_s();
    if (start >= 0)
        fprintf(f,
                "# HELP process_start_time_seconds When perseusd started, as Unix time in "
                "seconds.\n# TYPE process_start_time_seconds gauge\n"
                "process_start_time_seconds %.2f\n",
                start);
}
