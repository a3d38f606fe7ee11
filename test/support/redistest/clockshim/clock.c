/*
 * clock.c: a controlled wall clock for redis-server, loaded with LD_PRELOAD by
 * redistest.WithClock. CLOCK_REALTIME (and gettimeofday, time) read the real clock plus an
 * offset in nanoseconds, read from the file REDISTEST_CLOCK_FILE names on every call, so a
 * test moves the server's TIME (and what its scripts see) by rewriting the file. Monotonic
 * clocks are untouched: the event loop keeps its pace. The real clock is read with the raw
 * system call: no dlsym, no allocation, nothing that could call back into these functions
 * (jemalloc reads the clock while it initializes, which is why libfaketime cannot load into
 * Debian's redis-server).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static long long offset_ns(void) {
  const char *path = getenv("REDISTEST_CLOCK_FILE");
  char buf[32];
  long n;
  int fd;
  if (!path) return 0;
  fd = (int)syscall(SYS_open, path, O_RDONLY);
  if (fd < 0) return 0;
  n = syscall(SYS_read, fd, buf, sizeof buf - 1);
  syscall(SYS_close, fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  return strtoll(buf, NULL, 10);
}

int clock_gettime(clockid_t clk, struct timespec *ts) {
  long r = syscall(SYS_clock_gettime, clk, ts);
  if (r == 0 && (clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_COARSE)) {
    long long ns = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec + offset_ns();
    ts->tv_sec = ns / 1000000000LL;
    ts->tv_nsec = ns % 1000000000LL;
  }
  return (int)r;
}

int gettimeofday(struct timeval *tv, void *tz) {
  struct timespec ts;
  int r = clock_gettime(CLOCK_REALTIME, &ts);
  (void)tz;
  if (r == 0 && tv) {
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
  }
  return r;
}

time_t time(time_t *t) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  if (t) *t = ts.tv_sec;
  return ts.tv_sec;
}
