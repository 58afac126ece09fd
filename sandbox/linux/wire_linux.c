// The frame codec of the spawner and the init: the frames they read from the parent on
// fd 3 and the reports they write on fd 4. protocol_linux.go is the other end and has
// the wire format; protocol_linux_test.go runs this file's parse and report functions
// against it in-process (wirecheck_linux.go).
//
//	fd 3, read     read_frame → parse_config (the config), rd_strv (the cgroup frame),
//	               parse_handover (the handover); read_config and read_handover fail
//	               the stage on a malformed frame
//	fd 4, written  report (READY, STARTED, LEFTOVER), failf (ERROR), report_exit (EXIT,
//	               with the artifact entries wb_artifact wrote); bridge writes its
//	               REP_LISTENER frame itself, since it carries a descriptor

#include "init_linux.h"

void wb_put(struct wbuf *b, const void *src, size_t n) {
	if (b->n + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->n + n)
			cap *= 2;
		uint8_t *p = realloc(b->p, cap);
		if (!p)
			_exit(EXIT_SETUP_FAILED);
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, src, n);
	b->n += n;
}

void wb_u8(struct wbuf *b, uint8_t v) { wb_put(b, &v, 1); }
void wb_u32(struct wbuf *b, uint32_t v) { wb_put(b, &v, 4); }
void wb_i64(struct wbuf *b, int64_t v) { wb_put(b, &v, 8); }

void wb_bytes(struct wbuf *b, const void *p, size_t n) {
	wb_u32(b, (uint32_t)n);
	wb_put(b, p, n);
}

void wb_str(struct wbuf *b, const char *s) { wb_bytes(b, s, s ? strlen(s) : 0); }

int write_all(int fd, const void *p, size_t n) {
	const uint8_t *c = p;
	while (n > 0) {
		ssize_t w = write(fd, c, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

// report_frame appends one report frame to f: its length, the kind, the payload.
void report_frame(struct wbuf *f, uint8_t kind, const struct wbuf *payload) {
	wb_u32(f, (uint32_t)(1 + (payload ? payload->n : 0)));
	wb_u8(f, kind);
	if (payload && payload->n)
		wb_put(f, payload->p, payload->n);
}

// report sends one frame. A failed write means the parent is gone, and Pdeathsig ends
// us anyway.
void report(uint8_t kind, struct wbuf *payload) {
	struct wbuf f = {0};
	report_frame(&f, kind, payload);
	write_all(REPORT_FD, f.p, f.n);
	free(f.p);
}

// error_payload is a REP_ERROR report's: the stage, the errno, the message.
void error_payload(struct wbuf *b, const char *stage, int err, const char *msg) {
	wb_str(b, stage);
	wb_u32(b, (uint32_t)err);
	wb_str(b, msg);
}

// fail reports a setup failure at stage and exits.
void __attribute__((noreturn)) failf(const char *stage, int err, const char *fmt, ...) {
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	struct wbuf b = {0};
	error_payload(&b, stage, err, msg);
	report(REP_ERROR, &b);
	_exit(EXIT_SETUP_FAILED);
}

// exit_payload is a REP_EXIT report's: how the program ended, what it used, and the
// artifacts c collected (none without c).
void exit_payload(struct wbuf *b, const struct exit_info *x, const struct collector *c) {
	wb_u8(b, (uint8_t)x->exited);
	wb_u32(b, (uint32_t)x->code);
	wb_u32(b, (uint32_t)x->signal);
	wb_i64(b, x->cpu_usec);
	wb_i64(b, x->max_rss);
	wb_u32(b, c ? c->listed : 0);
	if (c && c->out.n)
		wb_put(b, c->out.p, c->out.n);
}

// report_exit sends the REP_EXIT report.
void report_exit(const struct exit_info *x, const struct collector *c) {
	struct wbuf b = {0};
	exit_payload(&b, x, c);
	report(REP_EXIT, &b);
	free(b.p);
}

// wb_artifact appends one entry of an exit report's artifact list: its path and size,
// why it was not returned (ART_*; ART_RETURNED: it was), and its bytes if it was.
void wb_artifact(struct wbuf *b, const char *path, int64_t size, uint8_t why, const uint8_t *data, uint32_t len) {
	wb_str(b, path);
	wb_i64(b, size);
	wb_u8(b, why);
	wb_bytes(b, data, why == ART_RETURNED ? len : 0);
}

static int read_full(int fd, void *p, size_t n) {
	uint8_t *c = p;
	while (n > 0) {
		ssize_t r = read(fd, c, n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (r == 0) {
			errno = EPIPE;
			return -1;
		}
		c += r;
		n -= (size_t)r;
	}
	return 0;
}

// read_frame reads one length-prefixed frame from the parent.
struct cur read_frame(const char *stage) {
	uint32_t n;
	if (read_full(CONFIG_FD, &n, 4) < 0)
		fail(stage, "read");
	if (n > MAX_FRAME)
		failf(stage, EINVAL, "frame of %u bytes", n);
	uint8_t *p = malloc(n ? n : 1);
	if (!p)
		fail(stage, "malloc");
	if (read_full(CONFIG_FD, p, n) < 0)
		fail(stage, "read");
	return (struct cur){p, n, 0};
}

// rd_fixed copies the next n bytes into out, or marks the frame bad and zeroes out.
static void rd_fixed(struct cur *c, void *out, size_t n) {
	if (c->n < n) {
		c->bad = 1;
		memset(out, 0, n);
		return;
	}
	memcpy(out, c->p, n);
	c->p += n;
	c->n -= n;
}

static uint32_t rd_u32(struct cur *c) {
	uint32_t v;
	rd_fixed(c, &v, sizeof v);
	return v;
}

static uint64_t rd_u64(struct cur *c) {
	uint64_t v;
	rd_fixed(c, &v, sizeof v);
	return v;
}

static const uint8_t *rd_bytes(struct cur *c, uint32_t *len) {
	uint32_t n = rd_u32(c);
	if (c->bad || c->n < n) {
		c->bad = 1;
		*len = 0;
		return (const uint8_t *)"";
	}
	const uint8_t *p = c->p;
	c->p += n;
	c->n -= n;
	*len = n;
	return p;
}

// rd_str reads a string that must not contain NUL (paths, argv, environment).
static char *rd_str(struct cur *c) {
	uint32_t n;
	const uint8_t *p = rd_bytes(c, &n);
	if (memchr(p, 0, n))
		c->bad = 1;
	char *s = malloc(n + 1);
	if (!s)
		_exit(EXIT_SETUP_FAILED);
	memcpy(s, p, n);
	s[n] = 0;
	return s;
}

char **rd_strv(struct cur *c) {
	uint32_t n = rd_u32(c);
	if (c->bad || n > c->n / 4) {
		c->bad = 1;
		n = 0;
	}
	char **v = calloc(n + 1, sizeof *v);
	if (!v)
		_exit(EXIT_SETUP_FAILED);
	for (uint32_t i = 0; i < n; i++)
		v[i] = rd_str(c);
	return v;
}

static struct rlim *rd_rlimits(struct cur *c, uint32_t *n) {
	*n = rd_u32(c);
	if (c->bad || *n > MAX_RLIMITS || *n > c->n / 12) {
		c->bad = 1;
		*n = 0;
	}
	struct rlim *r = calloc(*n + 1, sizeof *r);
	if (!r)
		_exit(EXIT_SETUP_FAILED);
	for (uint32_t i = 0; i < *n; i++) {
		r[i].res = rd_u32(c);
		r[i].value = rd_u64(c);
	}
	return r;
}

// rd_filter reads a seccomp program: a copy, since the frame gives no alignment and the
// kernel wants struct sock_filter's. A length that is no whole number of instructions,
// or more than the kernel takes, returns -1.
static int rd_filter(struct cur *c, struct sock_filter **out, uint32_t *len) {
	uint32_t flen;
	const uint8_t *f = rd_bytes(c, &flen);
	*out = NULL;
	*len = 0;
	if (flen % sizeof(struct sock_filter) != 0 || flen / sizeof(struct sock_filter) > BPF_MAXINSNS)
		return -1;
	*out = malloc(flen ? flen : 1);
	if (!*out)
		fail("read config", "malloc");
	memcpy(*out, f, flen);
	*len = flen / sizeof(struct sock_filter);
	return 0;
}

// parse_config reads a config frame's payload into cfg. A malformed frame returns -1
// with e saying why; cfg is then not to be used. Strings and arrays are allocated,
// byte fields (a copy step's content) point into the frame.
int parse_config(struct cur *c, struct config *cfg, struct wire_error *e) {
	e->stage = "read config";
	e->msg[0] = 0;
	cfg->flags = rd_u32(c);
	cfg->clone_flags = rd_u32(c);
	cfg->host_uid = rd_u32(c);
	cfg->host_gid = rd_u32(c);
	cfg->uidmap = rd_str(c);
	cfg->gidmap = rd_str(c);
	cfg->hostname = rd_str(c);
	cfg->nops = rd_u32(c);
	if (c->bad || cfg->nops > MAX_OPS || cfg->nops > c->n / 4) {
		cfg->nops = 0;
		snprintf(e->msg, sizeof e->msg, "malformed mount plan");
		return -1;
	}
	cfg->ops = calloc(cfg->nops + 1, sizeof *cfg->ops);
	if (!cfg->ops)
		fail("read config", "malloc");
	for (uint32_t i = 0; i < cfg->nops; i++) {
		struct op *o = &cfg->ops[i];
		o->kind = rd_u32(c);
		o->is_file = rd_u32(c);
		if (o->is_file > 1)
			c->bad = 1;
		o->flags = rd_u64(c);
		o->source = rd_str(c);
		o->target = rd_str(c);
		o->link = rd_str(c);
		o->data = rd_str(c);
		o->content = rd_bytes(c, &o->content_len);
	}
	if (rd_filter(c, &cfg->filter, &cfg->filter_len) < 0) {
		e->stage = "seccomp";
		snprintf(e->msg, sizeof e->msg, "seccomp: malformed program");
		return -1;
	}
	cfg->env = rd_strv(c);
	cfg->preload = rd_strv(c);
	cfg->out_dir = rd_str(c);
	cfg->max_files = (int64_t)rd_u64(c);
	cfg->max_file_bytes = (int64_t)rd_u64(c);
	cfg->max_total = (int64_t)rd_u64(c);
	cfg->max_entries = rd_u32(c);
	cfg->max_depth = rd_u32(c);
	cfg->max_walk = rd_u32(c);
	cfg->rl = rd_rlimits(c, &cfg->nrl);
	cfg->proxy_port = rd_u32(c);
	if (c->bad || c->n != 0 || cfg->proxy_port > 65535) {
		snprintf(e->msg, sizeof e->msg, "malformed config frame");
		return -1;
	}
	return 0;
}

// read_config reads the config frame from the parent.
void read_config(struct config *cfg) {
	struct cur c = read_frame("read config");
	struct wire_error e;
	if (parse_config(&c, cfg, &e) < 0)
		failf(e.stage, EINVAL, "%s", e.msg);
}

// parse_handover reads a handover frame's payload into h, as parse_config does.
int parse_handover(struct cur *c, struct handover *h, struct wire_error *e) {
	e->stage = "read handover";
	e->msg[0] = 0;
	h->argv = rd_strv(c);
	h->tail = rd_strv(c);
	h->code = rd_bytes(c, &h->code_len);
	h->code_file = rd_str(c);
	h->nfiles = rd_u32(c);
	if (c->bad || h->nfiles > c->n / 4) {
		h->nfiles = 0;
		snprintf(e->msg, sizeof e->msg, "malformed handover");
		return -1;
	}
	h->files = calloc(h->nfiles + 1, sizeof *h->files);
	if (!h->files)
		fail("read handover", "malloc");
	for (uint32_t i = 0; i < h->nfiles; i++) {
		h->files[i].path = rd_str(c);
		h->files[i].mode = rd_u32(c);
		h->files[i].data = rd_bytes(c, &h->files[i].len);
	}
	h->rl = rd_rlimits(c, &h->nrl);
	if (c->bad || c->n != 0) {
		snprintf(e->msg, sizeof e->msg, "malformed handover frame");
		return -1;
	}
	return 0;
}

// read_handover reads the handover frame from the parent.
void read_handover(struct handover *h) {
	struct cur c = read_frame("read handover");
	struct wire_error e;
	if (parse_handover(&c, h, &e) < 0)
		failf(e.stage, EINVAL, "%s", e.msg);
}

// parse_landlock reads the landlock frame (CFG_LANDLOCK, after the cgroup frame):
// encodeLandlock in landlock_linux.go.
int parse_landlock(struct cur *c, struct ll_plan *p) {
	p->want = rd_u32(c);
	p->workspace = rd_str(c);
	p->tmp = rd_str(c);
	p->ro = rd_strv(c);
	p->rw_files = rd_strv(c);
	if (rd_filter(c, &p->filter, &p->filter_len) < 0)
		return -1;
	return c->bad || c->n != 0 || !p->workspace[0] || !p->tmp[0] ? -1 : 0;
}
