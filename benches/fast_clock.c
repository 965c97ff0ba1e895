/* The wall clock of one process, sped up: loaded before gpuscope by
 * rss_soak.sh (GPUSCOPE_BENCH_SPEEDUP), it makes CLOCK_REALTIME run
 * GPUSCOPE_FAST_CLOCK times as fast from the moment the process starts.
 * Every other clock, and every wait, is left as it is: the poller's and
 * the event loop's timers wait on the monotonic clock and keep the pace
 * of the interval they are given. libfaketime's speed-up was tried first:
 * it also shortens every epoll_wait timeout by the same factor, which
 * left tokio's timer waking with nothing due and spinning a whole CPU.
 *
 * Rust's SystemTime::now reads CLOCK_REALTIME through the C library's
 * clock_gettime, the one symbol replaced here.
 *
 * Build: cc -O2 -shared -fPIC -o fast_clock.so fast_clock.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <time.h>

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);

static clock_gettime_fn next_clock_gettime;
static long long speedup = 1;
static long long origin_ns;

static long long to_ns(const struct timespec *t) { return t->tv_sec * 1000000000LL + t->tv_nsec; }

/* Runs before the program's own code, so before its first thread. */
__attribute__((constructor)) static void fast_clock_start(void) {
  struct timespec now;
  const char *factor = getenv("GPUSCOPE_FAST_CLOCK");
  next_clock_gettime = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
  if (factor != NULL && atoll(factor) > 1) speedup = atoll(factor);
  if (next_clock_gettime != NULL && next_clock_gettime(CLOCK_REALTIME, &now) == 0) origin_ns = to_ns(&now);
}

int clock_gettime(clockid_t id, struct timespec *t) {
  long long fast;
  int r;
  if (next_clock_gettime == NULL) fast_clock_start();
  if (next_clock_gettime == NULL) {
    errno = ENOSYS;
    return -1;
  }
  r = next_clock_gettime(id, t);
  if (r != 0 || (id != CLOCK_REALTIME && id != CLOCK_REALTIME_COARSE)) return r;
  fast = origin_ns + (to_ns(t) - origin_ns) * speedup;
  t->tv_sec = fast / 1000000000LL;
  t->tv_nsec = fast % 1000000000LL;
  return r;
}
