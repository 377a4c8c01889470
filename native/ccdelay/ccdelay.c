/*
 * ccdelay - constant-delay element for the ccbench emulated dumbbell.
 *
 * An iptables NFQUEUE rule in the delay namespace hands every forwarded
 * packet to this program.  The kernel keeps the packet; we only receive its
 * id and timestamp (copy mode META), remember (id, due time) in a FIFO ring
 * and, once the head is due, accept every due packet with one batch verdict.
 * A constant delay never reorders, so FIFO release is exact.
 *
 * Two threads by default: a reader (netlink receive, stamping) and a
 * releaser (sleeps until the head is due, sends the verdicts, which is where
 * the kernel forwards the released packets).  They share a single-producer /
 * single-consumer ring.  The main thread handles signals and stats.
 * --single-thread does everything in one loop.
 *
 * See README.md for the command line and the stats JSON schema.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <endian.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <libnetfilter_queue/libnetfilter_queue.h>

#ifndef SOL_NETLINK
#define SOL_NETLINK 270
#endif

#define CCDELAY_VERSION "1.1"
#define STATS_SCHEMA "ccdelay-stats/1"

#define NSEC_PER_SEC 1000000000LL
#define NSEC_PER_MSEC 1000000LL
#define NSEC_PER_USEC 1000LL

/* Receive batching: messages per recvmmsg() and bytes per message slot. */
#define RX_BATCH 128
#define RX_SLOT 2048
#define DRAIN_BATCHES 32

/* A kernel timestamp further than this from "now" is not trusted. */
#define STAMP_PLAUSIBLE_PAST_NS (10LL * NSEC_PER_SEC)
#define STAMP_PLAUSIBLE_FUTURE_NS (2LL * NSEC_PER_MSEC)

/* Lateness histogram: upper bucket edges in nanoseconds; last bucket +inf. */
static const int64_t bucket_edges_ns[] = {
	100 * NSEC_PER_USEC, 500 * NSEC_PER_USEC, 1 * NSEC_PER_MSEC,
	2 * NSEC_PER_MSEC, 5 * NSEC_PER_MSEC, 10 * NSEC_PER_MSEC,
	20 * NSEC_PER_MSEC, 50 * NSEC_PER_MSEC,
};
#define N_EDGES ((int)(sizeof(bucket_edges_ns) / sizeof(bucket_edges_ns[0])))
#define N_BUCKETS (N_EDGES + 1)
#define LATE_THRESHOLD_NS (5 * NSEC_PER_MSEC)

/* Counters have one writing thread each; the stats writer reads them
 * concurrently.  Relaxed atomics keep that well defined at no cost. */
#define CGET(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define CSET(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define CADD(x, v) CSET(x, CGET(x) + (v))
#define CINC(x) CADD(x, 1)

enum stamp_mode { STAMP_KERNEL, STAMP_RECEIVE };

struct options {
	unsigned queue;
	int64_t delay_ns;
	const char *stats_path;
	uint32_t maxlen;
	int rcvbuf;
	int64_t slack_ns;
	int64_t read_quantum_ns;
	int64_t max_late_ns;
	int rt_prio;
	int cpu_reader;
	int cpu_releaser;
	enum stamp_mode stamp;
	int64_t stats_interval_ns;
	bool single_thread;
};

struct entry {
	int64_t due; /* CLOCK_MONOTONIC ns */
	uint32_t id;
	uint32_t pad;
};

/* written by the reader */
struct rx_stats {
	uint64_t received;
	uint64_t stamp_kernel_real;
	uint64_t stamp_kernel_mono;
	uint64_t stamp_receive;
	uint64_t stamp_rejected;
	uint64_t enobufs;
	uint64_t id_gaps;
	uint64_t truncated;
	uint64_t nl_errors;
	uint64_t max_held;
	uint64_t lag_count;
	uint64_t lag_sum_ns;
	int64_t lag_max_ns;
	uint64_t lag_buckets[N_BUCKETS];
	uint64_t overdue_on_receipt;
	uint64_t wakeups;
};

/* written by the releaser */
struct tx_stats {
	uint64_t released;
	uint64_t released_on_exit;
	uint64_t dropped_late;
	uint64_t verdict_batches;
	uint64_t verdict_sends;
	uint64_t verdict_errors;
	uint64_t enobufs;
	uint64_t late_count;
	uint64_t late_sum_ns;
	int64_t late_max_ns;
	uint64_t late_over_threshold;
	uint64_t buckets[N_BUCKETS];
	uint64_t wakeups;
};

static struct options opt = {
	.queue = 0,
	.delay_ns = -1,
	.stats_path = NULL,
	.maxlen = 200000,
	.rcvbuf = 64 << 20,
	.slack_ns = 200 * NSEC_PER_USEC,
	.read_quantum_ns = 500 * NSEC_PER_USEC,
	.max_late_ns = 0,
	.rt_prio = 0,
	.cpu_reader = -1,
	.cpu_releaser = -1,
	.stamp = STAMP_KERNEL,
	.stats_interval_ns = NSEC_PER_SEC,
	.single_thread = false,
};

static struct rx_stats rx;
static struct tx_stats tx;
static uint64_t stats_writes, stats_write_errors;

/* SPSC ring of held packets: the reader appends at tail, the releaser
 * consumes from head.  Indices only grow. */
static struct entry *ring;
static uint32_t ring_mask;
static uint64_t ring_head;
static uint64_t ring_tail;

static struct mnl_socket *nl;
static int nl_fd = -1;
static uint32_t portid;
static uint32_t last_id_seen;
static bool have_last_id;
static bool last_stamp_receive;
static bool timestamping_enabled;
static int64_t started_real_ns;

static int wake_fd = -1;  /* reader -> idle releaser: "ring not empty" */
static int stop_fd = -1;  /* main -> threads: stop */
static int releaser_idle; /* atomic flag */
static int stopping;      /* atomic flag */

static volatile sig_atomic_t sig_stop;
static volatile sig_atomic_t sig_dump;

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void die(const char *fmt, ...)
{
	va_list ap;
	char line[512];

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "ccdelay: %s\n", line);
	exit(1);
}

static void usage_error(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void usage_error(const char *fmt, ...)
{
	va_list ap;
	char line[512];

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "ccdelay: %s (try --help)\n", line);
	exit(2);
}

static inline int64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

static inline struct timespec ns_to_ts(int64_t ns)
{
	struct timespec ts;

	if (ns < 0)
		ns = 0;
	ts.tv_sec = ns / NSEC_PER_SEC;
	ts.tv_nsec = ns % NSEC_PER_SEC;
	return ts;
}

static void on_signal(int sig)
{
	if (sig == SIGUSR1)
		sig_dump = 1;
	else
		sig_stop = 1;
}

/* ------------------------------------------------------------------ */
/* argument parsing                                                    */

static long long parse_int(const char *name, const char *s, long long lo, long long hi)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end != '\0')
		usage_error("invalid %s '%s': not an integer", name, s);
	if (v < lo || v > hi)
		usage_error("invalid %s '%s': must be in [%lld, %lld]", name, s, lo, hi);
	return v;
}

static void print_help(void)
{
	printf(
"usage: ccdelay --delay-us N [options]\n"
"Constant one-way delay for packets handed over by an iptables NFQUEUE rule.\n"
"\n"
"  --queue N             NFQUEUE number to bind (default 0)\n"
"  --delay-us N          delay applied to every packet, microseconds (required)\n"
"  --stats PATH          write stats JSON here (atomically) every interval,\n"
"                        on SIGUSR1 and on exit\n"
"  --stats-interval-ms N stats period (default 1000)\n"
"  --maxlen N            kernel queue length in packets (default 200000)\n"
"  --rcvbuf BYTES        netlink receive buffer (default 67108864)\n"
"  --slack-us N          release quantum: at most one release per N us while\n"
"                        packets keep coming (default 200)\n"
"  --read-quantum-us N   reader batching: after a wakeup, wait up to N us\n"
"                        (at most delay/4) before reading (default 500)\n"
"  --max-late-us N       drop, instead of release, packets that would leave more\n"
"                        than N us late (overload safety valve; default 0 = never)\n"
"  --rt-prio N           run SCHED_FIFO with priority N (1-99; default off)\n"
"  --cpu R[,W]           pin the reader to CPU R and the releaser to CPU W\n"
"                        (one number: both; default: not pinned)\n"
"  --single-thread       receive and release in one thread\n"
"  --stamp kernel|receive  arrival time source (default kernel: the kernel's\n"
"                        packet timestamp, falling back to time of receipt)\n"
"  --version, --help\n"
"SIGTERM/SIGINT: accept every held packet, write stats, exit 0.\n"
"SIGUSR1: write stats now.\n");
}

static void parse_cpus(const char *s)
{
	char buf[64];
	char *comma;

	if (strlen(s) >= sizeof(buf))
		usage_error("invalid --cpu '%s'", s);
	strcpy(buf, s);
	comma = strchr(buf, ',');
	if (comma) {
		*comma = '\0';
		opt.cpu_reader = (int)parse_int("--cpu", buf, 0, CPU_SETSIZE - 1);
		opt.cpu_releaser = (int)parse_int("--cpu", comma + 1, 0, CPU_SETSIZE - 1);
	} else {
		opt.cpu_reader = opt.cpu_releaser = (int)parse_int("--cpu", buf, 0, CPU_SETSIZE - 1);
	}
}

static void parse_args(int argc, char **argv)
{
	enum { O_QUEUE = 256, O_DELAY, O_STATS, O_MAXLEN, O_RCVBUF, O_SLACK, O_RQUANT,
	       O_RTPRIO, O_CPU, O_STAMP, O_INTERVAL, O_SINGLE, O_MAXLATE, O_VERSION, O_HELP };
	static const struct option longopts[] = {
		{ "queue", required_argument, NULL, O_QUEUE },
		{ "delay-us", required_argument, NULL, O_DELAY },
		{ "stats", required_argument, NULL, O_STATS },
		{ "maxlen", required_argument, NULL, O_MAXLEN },
		{ "rcvbuf", required_argument, NULL, O_RCVBUF },
		{ "slack-us", required_argument, NULL, O_SLACK },
		{ "read-quantum-us", required_argument, NULL, O_RQUANT },
		{ "rt-prio", required_argument, NULL, O_RTPRIO },
		{ "cpu", required_argument, NULL, O_CPU },
		{ "stamp", required_argument, NULL, O_STAMP },
		{ "stats-interval-ms", required_argument, NULL, O_INTERVAL },
		{ "single-thread", no_argument, NULL, O_SINGLE },
		{ "max-late-us", required_argument, NULL, O_MAXLATE },
		{ "version", no_argument, NULL, O_VERSION },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
		switch (c) {
		case O_QUEUE:
			opt.queue = (unsigned)parse_int("--queue", optarg, 0, 65535);
			break;
		case O_DELAY:
			opt.delay_ns = parse_int("--delay-us", optarg, 0, 10LL * 1000 * 1000) *
				       NSEC_PER_USEC;
			break;
		case O_STATS:
			if (!*optarg)
				usage_error("invalid --stats '': empty path");
			opt.stats_path = optarg;
			break;
		case O_MAXLEN:
			opt.maxlen = (uint32_t)parse_int("--maxlen", optarg, 1, 1 << 24);
			break;
		case O_RCVBUF:
			opt.rcvbuf = (int)parse_int("--rcvbuf", optarg, 65536, INT_MAX);
			break;
		case O_SLACK:
			opt.slack_ns = parse_int("--slack-us", optarg, 0, 1000000) * NSEC_PER_USEC;
			break;
		case O_RQUANT:
			opt.read_quantum_ns =
				parse_int("--read-quantum-us", optarg, 0, 1000000) * NSEC_PER_USEC;
			break;
		case O_MAXLATE:
			opt.max_late_ns = parse_int("--max-late-us", optarg, 0, 10LL * 1000 * 1000) *
					  NSEC_PER_USEC;
			break;
		case O_RTPRIO:
			opt.rt_prio = (int)parse_int("--rt-prio", optarg, 0, 99);
			break;
		case O_CPU:
			parse_cpus(optarg);
			break;
		case O_STAMP:
			if (strcmp(optarg, "kernel") == 0)
				opt.stamp = STAMP_KERNEL;
			else if (strcmp(optarg, "receive") == 0)
				opt.stamp = STAMP_RECEIVE;
			else
				usage_error("invalid --stamp '%s': use kernel or receive", optarg);
			break;
		case O_INTERVAL:
			opt.stats_interval_ns =
				parse_int("--stats-interval-ms", optarg, 10, 3600000) * NSEC_PER_MSEC;
			break;
		case O_SINGLE:
			opt.single_thread = true;
			break;
		case O_VERSION:
			printf("ccdelay %s\n", CCDELAY_VERSION);
			exit(0);
		case O_HELP:
			print_help();
			exit(0);
		case ':':
			usage_error("option %s needs a value", argv[optind - 1]);
		default:
			usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		usage_error("unexpected argument '%s'", argv[optind]);
	if (opt.delay_ns < 0)
		usage_error("--delay-us is required");
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	if (ncpu > 0 && (opt.cpu_reader >= ncpu || opt.cpu_releaser >= ncpu))
		usage_error("invalid --cpu: this machine has CPUs 0-%ld", ncpu - 1);
	/* reading later than a quarter of the delay would eat into it */
	if (opt.read_quantum_ns > opt.delay_ns / 4)
		opt.read_quantum_ns = opt.delay_ns / 4;
}

/* ------------------------------------------------------------------ */
/* stats                                                               */

static void read_kernel_queue(long long out[5])
{
	/* /proc/net/netfilter/nfnetlink_queue: queue portid total mode range
	 * dropped user_dropped id_sequence 1 */
	FILE *f = fopen("/proc/net/netfilter/nfnetlink_queue", "re");
	char line[256];

	for (int i = 0; i < 5; i++)
		out[i] = -1;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned q, pid, total, mode, range, dropped, udropped, idseq;

		if (sscanf(line, "%u %u %u %u %u %u %u %u", &q, &pid, &total, &mode, &range,
			   &dropped, &udropped, &idseq) == 8 && q == opt.queue) {
			out[0] = total;
			out[1] = dropped;
			out[2] = udropped;
			out[3] = idseq;
			out[4] = pid;
			break;
		}
	}
	fclose(f);
}

static const char *clock_source(void)
{
	uint64_t k = CGET(rx.stamp_kernel_real) + CGET(rx.stamp_kernel_mono);
	uint64_t r = CGET(rx.stamp_receive);

	if (k == 0 && r == 0)
		return opt.stamp == STAMP_KERNEL ? "none-yet" : "receive";
	if (r == 0)
		return "kernel";
	if (k == 0)
		return "receive";
	return "mixed";
}

static long long kq_at_exit[5];
static bool kq_at_exit_valid;

static void write_stats(bool final)
{
	char tmp[PATH_MAX];
	long long kq[5];
	struct rusage ru;
	FILE *f;
	int64_t now_real = clock_ns(CLOCK_REALTIME);
	uint64_t late_count = CGET(tx.late_count), lag_count = CGET(rx.lag_count);
	uint64_t over = CGET(tx.late_over_threshold);
	uint64_t head = __atomic_load_n(&ring_head, __ATOMIC_ACQUIRE);
	uint64_t tail = __atomic_load_n(&ring_tail, __ATOMIC_ACQUIRE);
	double late_mean_ms, lag_mean_ms, share;

	if (!opt.stats_path)
		return;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", opt.stats_path, (int)getpid()) >=
	    (int)sizeof(tmp)) {
		stats_write_errors++;
		return;
	}
	if (final && kq_at_exit_valid)
		memcpy(kq, kq_at_exit, sizeof(kq)); /* the queue is unbound by now */
	else
		read_kernel_queue(kq);
	getrusage(RUSAGE_SELF, &ru);
	late_mean_ms = late_count ? (double)CGET(tx.late_sum_ns) / late_count / 1e6 : 0.0;
	lag_mean_ms = lag_count ? (double)CGET(rx.lag_sum_ns) / lag_count / 1e6 : 0.0;
	share = late_count ? (double)over / late_count : 0.0;

	f = fopen(tmp, "we");
	if (!f) {
		stats_write_errors++;
		return;
	}
	fprintf(f, "{\n");
	fprintf(f, "  \"schema\": \"%s\",\n", STATS_SCHEMA);
	fprintf(f, "  \"version\": \"%s\",\n", CCDELAY_VERSION);
	fprintf(f, "  \"pid\": %d,\n", (int)getpid());
	fprintf(f, "  \"final\": %s,\n", final ? "true" : "false");
	fprintf(f, "  \"started_unix\": %.6f,\n", started_real_ns / 1e9);
	fprintf(f, "  \"updated_unix\": %.6f,\n", now_real / 1e9);
	fprintf(f, "  \"config\": {\"queue\": %u, \"delay_us\": %" PRId64
		   ", \"queue_maxlen\": %u, \"rcvbuf_bytes\": %d, \"slack_us\": %" PRId64
		   ", \"read_quantum_us\": %" PRId64 ", \"max_late_us\": %" PRId64
		   ", \"rt_prio\": %d, \"cpu_reader\": %d, \"cpu_releaser\": %d"
		   ", \"threads\": %d, \"stamp\": \"%s\"},\n",
		opt.queue, (int64_t)(opt.delay_ns / NSEC_PER_USEC), opt.maxlen, opt.rcvbuf,
		(int64_t)(opt.slack_ns / NSEC_PER_USEC),
		(int64_t)(opt.read_quantum_ns / NSEC_PER_USEC),
		(int64_t)(opt.max_late_ns / NSEC_PER_USEC), opt.rt_prio, opt.cpu_reader,
		opt.cpu_releaser, opt.single_thread ? 1 : 2,
		opt.stamp == STAMP_KERNEL ? "kernel" : "receive");
	fprintf(f, "  \"clock_source\": \"%s\",\n", clock_source());
	fprintf(f, "  \"timestamping_enabled\": %s,\n", timestamping_enabled ? "true" : "false");
	fprintf(f, "  \"stamps\": {\"kernel_realtime\": %" PRIu64 ", \"kernel_monotonic\": %" PRIu64
		   ", \"receive\": %" PRIu64 ", \"rejected\": %" PRIu64 "},\n",
		CGET(rx.stamp_kernel_real), CGET(rx.stamp_kernel_mono), CGET(rx.stamp_receive),
		CGET(rx.stamp_rejected));
	fprintf(f, "  \"packets_received\": %" PRIu64 ",\n", CGET(rx.received));
	fprintf(f, "  \"packets_released\": %" PRIu64 ",\n", CGET(tx.released));
	fprintf(f, "  \"packets_released_on_exit\": %" PRIu64 ",\n", CGET(tx.released_on_exit));
	fprintf(f, "  \"packets_dropped_late\": %" PRIu64 ",\n", CGET(tx.dropped_late));
	fprintf(f, "  \"packets_held\": %" PRIu64 ",\n", tail - head);
	fprintf(f, "  \"max_held\": %" PRIu64 ",\n", CGET(rx.max_held));
	fprintf(f, "  \"verdict_batches\": %" PRIu64 ",\n", CGET(tx.verdict_batches));
	fprintf(f, "  \"verdict_sends\": %" PRIu64 ",\n", CGET(tx.verdict_sends));
	fprintf(f, "  \"verdict_errors\": %" PRIu64 ",\n",
		CGET(tx.verdict_errors) + CGET(rx.nl_errors));
	fprintf(f, "  \"wakeups\": %" PRIu64 ",\n", CGET(rx.wakeups) + CGET(tx.wakeups));
	fprintf(f, "  \"enobufs_events\": %" PRIu64 ",\n", CGET(rx.enobufs) + CGET(tx.enobufs));
	fprintf(f, "  \"id_gaps\": %" PRIu64 ",\n", CGET(rx.id_gaps));
	fprintf(f, "  \"truncated_messages\": %" PRIu64 ",\n", CGET(rx.truncated));
	fprintf(f, "  \"kernel_queue\": {\"queue_total\": %lld, \"queue_full_drops\": %lld, "
		   "\"user_drops\": %lld, \"id_sequence\": %lld, \"peer_portid\": %lld},\n",
		kq[0], kq[1], kq[2], kq[3], kq[4]);
	fprintf(f, "  \"lateness\": {\n");
	fprintf(f, "    \"count\": %" PRIu64 ",\n", late_count);
	fprintf(f, "    \"mean_ms\": %.6f,\n", late_mean_ms);
	fprintf(f, "    \"max_ms\": %.6f,\n", CGET(tx.late_max_ns) / 1e6);
	fprintf(f, "    \"threshold_ms\": %.3f,\n", LATE_THRESHOLD_NS / 1e6);
	fprintf(f, "    \"over_threshold\": %" PRIu64 ",\n", over);
	fprintf(f, "    \"over_threshold_share\": %.6f,\n", share);
	fprintf(f, "    \"bucket_edges_ms\": [");
	for (int i = 0; i < N_EDGES; i++)
		fprintf(f, "%s%g", i ? ", " : "", bucket_edges_ns[i] / 1e6);
	fprintf(f, "],\n    \"bucket_counts\": [");
	for (int i = 0; i < N_BUCKETS; i++)
		fprintf(f, "%s%" PRIu64, i ? ", " : "", CGET(tx.buckets[i]));
	fprintf(f, "]\n  },\n");
	fprintf(f, "  \"receive_lag\": {\"count\": %" PRIu64 ", \"mean_ms\": %.6f, \"max_ms\": %.6f, "
		   "\"overdue_on_receipt\": %" PRIu64 ", \"bucket_counts\": [",
		lag_count, lag_mean_ms, CGET(rx.lag_max_ns) / 1e6, CGET(rx.overdue_on_receipt));
	for (int i = 0; i < N_BUCKETS; i++)
		fprintf(f, "%s%" PRIu64, i ? ", " : "", CGET(rx.lag_buckets[i]));
	fprintf(f, "]},\n");
	fprintf(f, "  \"cpu\": {\"user_s\": %.6f, \"system_s\": %.6f},\n",
		ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6,
		ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6);
	fprintf(f, "  \"stats_writes\": %" PRIu64 ",\n", stats_writes + 1);
	fprintf(f, "  \"stats_write_errors\": %" PRIu64 "\n", stats_write_errors);
	fprintf(f, "}\n");
	if (fflush(f) != 0 || ferror(f)) {
		fclose(f);
		unlink(tmp);
		stats_write_errors++;
		return;
	}
	if (fclose(f) != 0 || rename(tmp, opt.stats_path) != 0) {
		unlink(tmp);
		stats_write_errors++;
		return;
	}
	stats_writes++;
}

/* ------------------------------------------------------------------ */
/* release side                                                        */

/*
 * Verdicts are collected into one buffer of NFQNL_MSG_VERDICT_BATCH messages
 * ("every id <= N gets this verdict") and sent with a single sendto().
 */
static char verdict_buf[16384];
static size_t verdict_len;
static int64_t last_release;

static void verdict_flush(void)
{
	if (!verdict_len)
		return;
	for (;;) {
		if (mnl_socket_sendto(nl, verdict_buf, verdict_len) >= 0)
			break;
		if (errno == EINTR)
			continue;
		if (errno == ENOBUFS || errno == EAGAIN) {
			/* the kernel did not take it: try again shortly */
			CINC(tx.enobufs);
			usleep(50);
			continue;
		}
		CINC(tx.verdict_errors);
		break;
	}
	CINC(tx.verdict_sends);
	verdict_len = 0;
}

static void verdict_add(uint32_t max_id, int verdict)
{
	struct nlmsghdr *nlh;

	if (verdict_len + 128 > sizeof(verdict_buf))
		verdict_flush();
	nlh = nfq_nlmsg_put(verdict_buf + verdict_len, NFQNL_MSG_VERDICT_BATCH, opt.queue);
	nfq_nlmsg_verdict_put(nlh, (int)max_id, verdict);
	verdict_len += NLMSG_ALIGN(nlh->nlmsg_len);
	CINC(tx.verdict_batches);
}

static inline int bucket_of(int64_t v)
{
	int b = 0;

	while (b < N_EDGES && v > bucket_edges_ns[b])
		b++;
	return b;
}

static inline void record_lateness(int64_t late)
{
	if (late < 0)
		late = 0;
	CINC(tx.buckets[bucket_of(late)]);
	CINC(tx.late_count);
	CADD(tx.late_sum_ns, (uint64_t)late);
	if (late > CGET(tx.late_max_ns))
		CSET(tx.late_max_ns, late);
	if (late > LATE_THRESHOLD_NS)
		CINC(tx.late_over_threshold);
}

/*
 * Release every held packet whose due time has passed: one verdict per run
 * of equal verdicts, one sendto for all.  With --max-late-us, packets that
 * would leave later than that are dropped instead (a safety valve: the
 * element then behaves like an overloaded link and TCP backs off, instead of
 * the delay growing without bound).  Releaser thread only.
 */
static void release_due(int64_t now)
{
	uint64_t h = ring_head;
	uint64_t t = __atomic_load_n(&ring_tail, __ATOMIC_ACQUIRE);
	int run_verdict = -1;
	uint32_t run_last = 0;

	while (h != t) {
		const struct entry *e = &ring[h & ring_mask];
		int64_t late = now - e->due;
		int v = NF_ACCEPT;

		if (late < 0)
			break;
		if (opt.max_late_ns > 0 && late > opt.max_late_ns) {
			v = NF_DROP;
			CINC(tx.dropped_late);
		} else {
			record_lateness(late);
			CINC(tx.released);
		}
		if (v != run_verdict && run_verdict != -1)
			verdict_add(run_last, run_verdict);
		run_verdict = v;
		run_last = e->id;
		h++;
	}
	if (run_verdict != -1) {
		verdict_add(run_last, run_verdict);
		verdict_flush();
		__atomic_store_n(&ring_head, h, __ATOMIC_RELEASE);
		last_release = now;
	}
}

/* Accept everything held, early (exit path, threads stopped). */
static void release_all(void)
{
	uint64_t n = ring_tail - ring_head;

	if (!n)
		return;
	verdict_add(ring[(ring_tail - 1) & ring_mask].id, NF_ACCEPT);
	verdict_flush();
	ring_head = ring_tail;
	CADD(tx.released, n);
	CADD(tx.released_on_exit, n);
}

/* When the releaser should next run; INT64_MAX if nothing is held. */
static int64_t next_due(void)
{
	uint64_t h = ring_head;
	uint64_t t = __atomic_load_n(&ring_tail, __ATOMIC_ACQUIRE);
	int64_t due;

	if (h == t)
		return INT64_MAX;
	due = ring[h & ring_mask].due;
	/* batch: no more than one release per quantum */
	if (due < last_release + opt.slack_ns)
		due = last_release + opt.slack_ns;
	return due;
}

/* ------------------------------------------------------------------ */
/* receive side                                                        */

/* Returns the arrival time (CLOCK_MONOTONIC ns) for a packet. */
static inline int64_t arrival_time(struct nlattr *tsattr, int64_t now_mono, int64_t now_real)
{
	int64_t lag = 0;
	bool stamped = false;

	if (opt.stamp == STAMP_KERNEL && tsattr &&
	    mnl_attr_get_payload_len(tsattr) >= sizeof(struct nfqnl_msg_packet_timestamp)) {
		struct nfqnl_msg_packet_timestamp *t = mnl_attr_get_payload(tsattr);
		int64_t ts = (int64_t)be64toh(t->sec) * NSEC_PER_SEC +
			     (int64_t)be64toh(t->usec) * NSEC_PER_USEC;
		int64_t d_real = now_real - ts;
		int64_t d_mono = now_mono - ts;

		/* NFQUEUE reports wall-clock receive stamps; a packet can also
		 * carry a monotonic delivery time (EDT) from a local sender. */
		if (d_real > -STAMP_PLAUSIBLE_FUTURE_NS && d_real < STAMP_PLAUSIBLE_PAST_NS) {
			CINC(rx.stamp_kernel_real);
			lag = d_real;
			stamped = true;
		} else if (d_mono > -STAMP_PLAUSIBLE_FUTURE_NS && d_mono < STAMP_PLAUSIBLE_PAST_NS) {
			CINC(rx.stamp_kernel_mono);
			lag = d_mono;
			stamped = true;
		} else {
			CINC(rx.stamp_rejected);
		}
	}
	if (!stamped) {
		CINC(rx.stamp_receive);
		last_stamp_receive = true;
		return now_mono;
	}
	last_stamp_receive = false;
	if (lag < 0)
		lag = 0; /* stamped a hair "in the future": clock read order */
	CINC(rx.lag_count);
	CINC(rx.lag_buckets[bucket_of(lag)]);
	if (lag > opt.delay_ns)
		CINC(rx.overdue_on_receipt);
	CADD(rx.lag_sum_ns, (uint64_t)lag);
	if (lag > CGET(rx.lag_max_ns))
		CSET(rx.lag_max_ns, lag);
	return now_mono - lag;
}

static void ring_push(uint32_t id, int64_t due)
{
	uint64_t t = ring_tail;
	uint64_t h = __atomic_load_n(&ring_head, __ATOMIC_ACQUIRE);

	/* The ring is larger than the kernel queue, and every entry is a
	 * packet the kernel still holds, so this does not fill up; if it ever
	 * did, wait for the releaser rather than forget a packet. */
	while (t - h > ring_mask) {
		if (opt.single_thread) {
			verdict_add(ring[h & ring_mask].id, NF_ACCEPT);
			verdict_flush();
			CINC(tx.released);
			record_lateness(0);
			__atomic_store_n(&ring_head, h + 1, __ATOMIC_RELEASE);
		} else {
			usleep(20);
		}
		h = __atomic_load_n(&ring_head, __ATOMIC_ACQUIRE);
	}
	ring[t & ring_mask].id = id;
	ring[t & ring_mask].due = due;
	__atomic_store_n(&ring_tail, t + 1, __ATOMIC_RELEASE);
	if (t + 1 - h > CGET(rx.max_held))
		CSET(rx.max_held, t + 1 - h);
}

static int cfg_seq;
static int cfg_err = 1; /* 1 = no answer yet */

static void handle_msg(const struct nlmsghdr *nlh, int64_t now_mono, int64_t now_real)
{
	if (nlh->nlmsg_type == NLMSG_ERROR) {
		const struct nlmsgerr *err = mnl_nlmsg_get_payload(nlh);

		if (nlh->nlmsg_len < mnl_nlmsg_size(sizeof(*err)))
			return;
		if (cfg_seq && nlh->nlmsg_seq == (uint32_t)cfg_seq) {
			cfg_err = err->error;
			return;
		}
		if (err->error)
			CINC(rx.nl_errors);
		return;
	}
	if (nlh->nlmsg_type != ((NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET))
		return;

	struct nlattr *attr[NFQA_MAX + 1];
	memset(attr, 0, sizeof(attr));
	if (nfq_nlmsg_parse(nlh, attr) < 0 || !attr[NFQA_PACKET_HDR])
		return;
	struct nfqnl_msg_packet_hdr *ph = mnl_attr_get_payload(attr[NFQA_PACKET_HDR]);
	uint32_t id = ntohl(ph->packet_id);

	if (have_last_id && id != last_id_seen + 1)
		CADD(rx.id_gaps, (uint32_t)(id - last_id_seen - 1));
	last_id_seen = id;
	have_last_id = true;
	CINC(rx.received);

	ring_push(id, arrival_time(attr[NFQA_TIMESTAMP], now_mono, now_real) + opt.delay_ns);
}

static char *rx_bufs;
static struct mmsghdr rx_msgs[RX_BATCH];
static struct iovec rx_iov[RX_BATCH];

static void notify_releaser(void)
{
	static const uint64_t one = 1;

	if (opt.single_thread)
		return;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&releaser_idle, __ATOMIC_RELAXED)) {
		if (write(wake_fd, &one, sizeof(one)) < 0) {
			/* eventfd counter full cannot happen; nothing to do */
		}
	}
}

/* Read what is pending (non-blocking, at most max_batches recvmmsg calls).
 * Returns the number of datagrams read. */
static int drain_socket(int max_batches)
{
	int total = 0;

	for (int batch = 0; batch < max_batches; batch++) {
		int n = recvmmsg(nl_fd, rx_msgs, RX_BATCH, MSG_DONTWAIT, NULL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == ENOBUFS) {
				CINC(rx.enobufs);
				continue;
			}
			break; /* EAGAIN */
		}
		int64_t now_mono = clock_ns(CLOCK_MONOTONIC);
		int64_t now_real = clock_ns(CLOCK_REALTIME);

		for (int i = 0; i < n; i++) {
			int len = (int)rx_msgs[i].msg_len;
			const struct nlmsghdr *nlh = (const struct nlmsghdr *)rx_iov[i].iov_base;

			if (rx_msgs[i].msg_hdr.msg_flags & MSG_TRUNC)
				CINC(rx.truncated);
			while (mnl_nlmsg_ok(nlh, len)) {
				handle_msg(nlh, now_mono, now_real);
				nlh = mnl_nlmsg_next(nlh, &len);
			}
			rx_msgs[i].msg_hdr.msg_flags = 0;
		}
		total += n;
		if (n > 0)
			notify_releaser();
		if (n < RX_BATCH)
			break;
		/* single thread: keep the due ones moving while a large backlog
		 * is read */
		if (opt.single_thread)
			release_due(now_mono);
	}
	return total;
}

static void setup_rx(void)
{
	rx_bufs = malloc((size_t)RX_BATCH * RX_SLOT);
	if (!rx_bufs)
		die("out of memory");
	for (int i = 0; i < RX_BATCH; i++) {
		rx_iov[i].iov_base = rx_bufs + (size_t)i * RX_SLOT;
		rx_iov[i].iov_len = RX_SLOT;
		memset(&rx_msgs[i], 0, sizeof(rx_msgs[i]));
		rx_msgs[i].msg_hdr.msg_iov = &rx_iov[i];
		rx_msgs[i].msg_hdr.msg_iovlen = 1;
	}
}

/* ------------------------------------------------------------------ */
/* netlink set-up                                                      */

static void send_config(struct nlmsghdr *nlh, const char *what)
{
	int64_t deadline = clock_ns(CLOCK_MONOTONIC) + 2 * NSEC_PER_SEC;

	nlh->nlmsg_flags |= NLM_F_ACK;
	nlh->nlmsg_seq = (uint32_t)++cfg_seq;
	cfg_err = 1;
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		die("cannot %s NFQUEUE %u: %s", what, opt.queue, strerror(errno));
	while (cfg_err == 1) {
		struct pollfd p = { .fd = nl_fd, .events = POLLIN };
		int64_t left = deadline - clock_ns(CLOCK_MONOTONIC);

		if (left <= 0)
			die("cannot %s NFQUEUE %u: no answer from the kernel", what, opt.queue);
		poll(&p, 1, (int)(left / NSEC_PER_MSEC) + 1);
		drain_socket(1);
	}
	if (cfg_err < 0) {
		int e = -cfg_err;

		if (e == EPERM && geteuid() == 0) {
			long long kq[5];

			read_kernel_queue(kq);
			if (kq[4] > 0 && (uint32_t)kq[4] != portid)
				die("cannot %s NFQUEUE %u: already bound by another program "
				    "(netlink portid %lld)", what, opt.queue, kq[4]);
		}
		if (e == EPERM)
			die("cannot %s NFQUEUE %u: %s (needs root/CAP_NET_ADMIN in this namespace)",
			    what, opt.queue, strerror(e));
		die("cannot %s NFQUEUE %u: %s", what, opt.queue, strerror(e));
	}
}

static void setup_netlink(void)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh;
	int one = 1;

	nl = mnl_socket_open(NETLINK_NETFILTER);
	if (!nl)
		die("cannot open netfilter netlink socket: %s", strerror(errno));
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0)
		die("cannot bind netlink socket: %s", strerror(errno));
	portid = mnl_socket_get_portid(nl);
	nl_fd = mnl_socket_get_fd(nl);

	if (setsockopt(nl_fd, SOL_SOCKET, SO_RCVBUFFORCE, &opt.rcvbuf, sizeof(opt.rcvbuf)) < 0 &&
	    setsockopt(nl_fd, SOL_SOCKET, SO_RCVBUF, &opt.rcvbuf, sizeof(opt.rcvbuf)) < 0)
		die("cannot set netlink receive buffer: %s", strerror(errno));
	/* a full socket buffer must not turn into an error on our side; the
	 * kernel drops (and counts) such packets */
	setsockopt(nl_fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &one, sizeof(one));

	nlh = nfq_nlmsg_put(buf, NFQNL_MSG_CONFIG, opt.queue);
	nfq_nlmsg_cfg_put_cmd(nlh, AF_INET, NFQNL_CFG_CMD_BIND);
	send_config(nlh, "bind");

	nlh = nfq_nlmsg_put(buf, NFQNL_MSG_CONFIG, opt.queue);
	nfq_nlmsg_cfg_put_params(nlh, NFQNL_COPY_META, 0);
	nfq_nlmsg_cfg_put_qmaxlen(nlh, opt.maxlen);
	/* explicitly clear FAIL_OPEN: a full queue must drop, not bypass */
	mnl_attr_put_u32(nlh, NFQA_CFG_FLAGS, htonl(0));
	mnl_attr_put_u32(nlh, NFQA_CFG_MASK, htonl(NFQA_CFG_F_FAIL_OPEN));
	send_config(nlh, "configure");
	cfg_seq = 0;
}

static void unbind_queue(void)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = nfq_nlmsg_put(buf, NFQNL_MSG_CONFIG, opt.queue);

	nfq_nlmsg_cfg_put_cmd(nlh, AF_INET, NFQNL_CFG_CMD_UNBIND);
	mnl_socket_sendto(nl, nlh, nlh->nlmsg_len);
}

/* Any socket with SO_TIMESTAMP turns on the kernel's receive timestamping
 * (net_enable_timestamp), so forwarded packets get skb->tstamp and NFQUEUE
 * passes it as NFQA_TIMESTAMP.  Keep the socket open for our lifetime. */
static void enable_kernel_timestamps(void)
{
	int one = 1;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return;
	if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMP, &one, sizeof(one)) == 0)
		timestamping_enabled = true;
	else
		close(fd);
}

/* CPU pinning and SCHED_FIFO for the calling thread.  The releaser gets
 * --rt-prio, the reader one less (it has the whole delay as slack and must
 * not hold up a release when both share a CPU). */
static void setup_thread_sched(int cpu, int prio)
{
	if (cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set) < 0)
			die("cannot pin to CPU %d: %s", cpu, strerror(errno));
	}
	if (opt.rt_prio > 0) {
		struct sched_param sp = { .sched_priority = prio > 0 ? prio : 1 };

		if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0)
			die("cannot set SCHED_FIFO priority %d: %s", sp.sched_priority,
			    strerror(errno));
	}
	/* precise wakeups: batching is done explicitly (--slack-us) */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
}

/* ------------------------------------------------------------------ */
/* threads                                                             */

static bool stop_requested(void)
{
	return __atomic_load_n(&stopping, __ATOMIC_RELAXED) != 0;
}

static void *reader_main(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "ccdelay-rx", 0, 0, 0);
	setup_thread_sched(opt.cpu_reader, opt.rt_prio - 1);
	while (!stop_requested()) {
		struct pollfd p[2] = { { .fd = nl_fd, .events = POLLIN },
				       { .fd = stop_fd, .events = POLLIN } };
		int n = drain_socket(DRAIN_BATCHES);

		if (n >= DRAIN_BATCHES * RX_BATCH)
			continue;
		if (ppoll(p, 2, NULL, NULL) > 0)
			CINC(rx.wakeups);
		if (p[1].revents)
			break;
		/* let a few more arrive: one wakeup per quantum, not per packet
		 * (arrival times come from the kernel, so reading later is
		 * harmless as long as it is well before the due time) */
		if (opt.read_quantum_ns > 0 && opt.stamp == STAMP_KERNEL && !last_stamp_receive) {
			struct timespec q = ns_to_ts(opt.read_quantum_ns);

			clock_nanosleep(CLOCK_MONOTONIC, 0, &q, NULL);
		}
	}
	return NULL;
}

static void *releaser_main(void *arg)
{
	uint64_t junk;

	(void)arg;
	prctl(PR_SET_NAME, "ccdelay-tx", 0, 0, 0);
	setup_thread_sched(opt.cpu_releaser, opt.rt_prio);
	while (!stop_requested()) {
		int64_t now = clock_ns(CLOCK_MONOTONIC);
		struct pollfd p[2] = { { .fd = wake_fd, .events = POLLIN },
				       { .fd = stop_fd, .events = POLLIN } };
		int64_t due;
		int r;

		release_due(now);
		due = next_due();
		if (due == INT64_MAX) {
			/* nothing held: announce idleness, re-check, sleep */
			__atomic_store_n(&releaser_idle, 1, __ATOMIC_RELAXED);
			__atomic_thread_fence(__ATOMIC_SEQ_CST);
			if (__atomic_load_n(&ring_tail, __ATOMIC_ACQUIRE) != ring_head) {
				__atomic_store_n(&releaser_idle, 0, __ATOMIC_RELAXED);
				continue;
			}
			r = ppoll(p, 2, NULL, NULL);
			__atomic_store_n(&releaser_idle, 0, __ATOMIC_RELAXED);
		} else {
			now = clock_ns(CLOCK_MONOTONIC);
			if (due <= now)
				continue;
			struct timespec ts = ns_to_ts(due - now);

			r = ppoll(p, 2, &ts, NULL);
		}
		CINC(tx.wakeups);
		if (r > 0 && (p[0].revents & POLLIN)) {
			if (read(wake_fd, &junk, sizeof(junk)) < 0) {
				/* EAGAIN: already cleared */
			}
		}
	}
	return NULL;
}

static void run_threads(void)
{
	pthread_t rd, rl;
	sigset_t set;
	int64_t next_stats = clock_ns(CLOCK_MONOTONIC) + opt.stats_interval_ns;
	static const uint64_t one = 1;
	int err;

	wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (wake_fd < 0 || stop_fd < 0)
		die("cannot create eventfd: %s", strerror(errno));
	/* signals stay blocked everywhere; the main thread takes them */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGUSR1);
	if ((err = pthread_create(&rd, NULL, reader_main, NULL)) != 0 ||
	    (err = pthread_create(&rl, NULL, releaser_main, NULL)) != 0)
		die("cannot start threads: %s", strerror(err));

	for (;;) {
		int64_t now = clock_ns(CLOCK_MONOTONIC);
		struct timespec ts;
		int sig;

		if (now >= next_stats) {
			write_stats(false);
			next_stats = now + opt.stats_interval_ns;
		}
		ts = ns_to_ts(next_stats - now);
		sig = sigtimedwait(&set, NULL, &ts);
		if (sig == SIGTERM || sig == SIGINT)
			break;
		if (sig == SIGUSR1)
			write_stats(false);
	}
	__atomic_store_n(&stopping, 1, __ATOMIC_RELAXED);
	if (write(stop_fd, &one, sizeof(one)) < 0)
		die("cannot stop threads: %s", strerror(errno));
	pthread_join(rd, NULL);
	pthread_join(rl, NULL);
}

static void run_single(const sigset_t *waitmask)
{
	int64_t next_stats = clock_ns(CLOCK_MONOTONIC) + opt.stats_interval_ns;

	setup_thread_sched(opt.cpu_reader, opt.rt_prio);
	while (!sig_stop) {
		int n = drain_socket(DRAIN_BATCHES);
		int64_t now = clock_ns(CLOCK_MONOTONIC);

		release_due(now);
		if (sig_dump) {
			sig_dump = 0;
			write_stats(false);
		}
		if (now >= next_stats) {
			write_stats(false);
			next_stats = now + opt.stats_interval_ns;
		}

		/*
		 * Sleep.  While packets are held and stamped by the kernel, their
		 * arrival times do not depend on when we read them, so we sleep
		 * until the head is due and read the backlog then.  With nothing
		 * held, or when stamping on receipt, wake on the first packet.
		 */
		int64_t wake = next_due();
		bool held = wake != INT64_MAX;
		bool lazy = held && opt.stamp == STAMP_KERNEL && !last_stamp_receive;
		struct pollfd p = { .fd = nl_fd, .events = lazy ? 0 : POLLIN };

		if (wake > next_stats)
			wake = next_stats;
		now = clock_ns(CLOCK_MONOTONIC);
		/* more backlog than one drain took: do not sleep, but still let
		 * pending signals in (they are blocked outside ppoll) */
		if (n >= DRAIN_BATCHES * RX_BATCH || wake < now)
			wake = now;
		struct timespec ts = ns_to_ts(wake - now);

		if (ppoll(&p, 1, &ts, waitmask) >= 0 && wake > now)
			CINC(tx.wakeups);
	}
}

int main(int argc, char **argv)
{
	struct sigaction sa;
	sigset_t block, waitmask;
	uint32_t size = 1;

	parse_args(argc, argv);

	while (size <= opt.maxlen + (opt.maxlen >> 3) + 1024)
		size <<= 1;
	ring = calloc(size, sizeof(*ring));
	if (!ring)
		die("out of memory for a ring of %u entries", size);
	ring_mask = size - 1;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGUSR1);
	sigprocmask(SIG_BLOCK, &block, &waitmask);
	sigdelset(&waitmask, SIGTERM);
	sigdelset(&waitmask, SIGINT);
	sigdelset(&waitmask, SIGUSR1);

	started_real_ns = clock_ns(CLOCK_REALTIME);
	if (opt.stats_path) {
		/* fail early on an unwritable stats path */
		char tmp[PATH_MAX];
		FILE *f;

		snprintf(tmp, sizeof(tmp), "%s.tmp.%d", opt.stats_path, (int)getpid());
		f = fopen(tmp, "we");
		if (!f)
			die("cannot write stats file %s: %s", tmp, strerror(errno));
		fclose(f);
		unlink(tmp);
	}
	setup_rx();
	if (opt.stamp == STAMP_KERNEL)
		enable_kernel_timestamps();
	setup_netlink();
	if (opt.rt_prio > 0)
		mlockall(MCL_CURRENT | MCL_FUTURE);
	write_stats(false);

	if (opt.single_thread)
		run_single(&waitmask);
	else
		run_threads();

	/* exit: accept everything still held, then unbind */
	for (int round = 0; round < 3; round++) {
		drain_socket(256);
		release_all();
	}
	read_kernel_queue(kq_at_exit);
	kq_at_exit_valid = true;
	unbind_queue();
	write_stats(true);
	return 0;
}
