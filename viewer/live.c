#include "live.h"

#include <curses.h>
#include <inttypes.h>
#include <langinfo.h>
#include <locale.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "livefmt.h"

#define SPARK_MAX 512 /* rounds of history the sparkline can show */
#define HEADER_ROWS 6 /* header lines, a blank, the table title */

enum sort_key { SORT_LIVE, SORT_RATE, SORT_GROWTH, SORT_TEMP };

static const char *const sort_title[] = {
    [SORT_LIVE] = "live bytes",
    [SORT_RATE] = "allocation rate (bytes/s, last round)",
    [SORT_GROWTH] = "growth (slope of live bytes over the last rounds)",
    [SORT_TEMP] = "temporary blocks (freed before the next allocation)",
};

struct row {
	const char *label;
	uint64_t live, blocks, allocs, temp;
	double rate, growth;
};

struct live {
	SCREEN *scr;
	bool utf8;
	int pid;
	char cmd[512];
	char *file;
	struct hp_stats st;
	struct row *rows;
	size_t nrows, cap;
	enum sort_key sort;
	size_t scroll;
	uint64_t spark[SPARK_MAX]; /* live bytes per round, a ring */
	size_t nspark;
	char notice[160];
	bool detaching;
};

/* For the SIGTERM handler and exit(): what gives the terminal back without curses. */
static volatile sig_atomic_t term_active;
static struct termios term_saved;
static char term_reset[256];
static size_t term_reset_len;

static void append_cap(const char *name)
{
	const char *s = tigetstr(name);
	if (!s || s == (const char *)-1)
		return;
	size_t n = strlen(s);
	if (term_reset_len + n < sizeof term_reset) {
		memcpy(term_reset + term_reset_len, s, n);
		term_reset_len += n;
	}
}

static void on_sigterm(int sig)
{
	if (term_active) {
		ssize_t w = write(STDOUT_FILENO, term_reset, term_reset_len);
		(void)w;
		tcsetattr(STDOUT_FILENO, TCSANOW, &term_saved);
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

static void leave_screen(void)
{
	if (!term_active)
		return;
	term_active = 0;
	endwin();
	fflush(stdout);
}

static void at_exit(void)
{
	leave_screen();
}

static int cmp_u64(uint64_t a, uint64_t b)
{
	return (a < b) - (a > b);
}

static int cmp_double(double a, double b)
{
	return (a < b) - (a > b);
}

static enum sort_key qsort_key; /* qsort has no context argument */

static int by_key(const void *pa, const void *pb)
{
	const struct row *a = pa, *b = pb;
	int c = 0;
	switch (qsort_key) {
	case SORT_LIVE:
		break;
	case SORT_RATE:
		c = cmp_double(a->rate, b->rate);
		break;
	case SORT_GROWTH:
		c = cmp_double(a->growth, b->growth);
		break;
	case SORT_TEMP:
		c = cmp_u64(a->temp, b->temp);
		break;
	}
	if (!c)
		c = cmp_u64(a->live, b->live);
	if (!c)
		c = cmp_u64(a->allocs, b->allocs);
	return c ? c : strcmp(a->label, b->label);
}

static void sort_rows(struct live *l)
{
	qsort_key = l->sort;
	if (l->nrows > 1)
		qsort(l->rows, l->nrows, sizeof *l->rows, by_key);
}

static size_t table_rows(void)
{
	int n = LINES - HEADER_ROWS - 2; /* column header and status line */
	return n > 0 ? (size_t)n : 0;
}

static void clamp_scroll(struct live *l)
{
	size_t vis = table_rows();
	size_t max = l->nrows > vis ? l->nrows - vis : 0;
	if (l->scroll > max)
		l->scroll = max;
}

/* text at (y, x), cut at the right edge between two characters. */
static void put(int y, int x, const char *text)
{
	if (y >= LINES || x >= COLS)
		return;
	mvaddnstr(y, x, text, (int)hp_text_fit(text, strlen(text), (size_t)(COLS - x), NULL));
}

static void draw_header(struct live *l)
{
	const struct hp_round *r = &l->st.last;
	char a[64], b[32], c[32], d[32], e[128], line[1024];

	attron(A_BOLD);
	put(0, 0, "heapprof");
	attroff(A_BOLD);
	hp_fmt_duration(a, sizeof a, r->time_ns / 1000000000u);
	snprintf(line, sizeof line, "  elapsed %s  round %u", a, l->st.rounds);
	int x = COLS - (int)strlen(line);
	x = x > 10 ? x : 10;
	/* The command in what the right part leaves, so that its end (the arguments) is not
	 * covered by it. */
	char head[sizeof l->cmd + 32], cmd[sizeof l->cmd];
	int hn = snprintf(head, sizeof head, "pid %d  ", l->pid);
	hp_fmt_command(cmd, sizeof cmd, l->cmd, x - 10 > hn ? (size_t)(x - 10 - hn) : 0);
	snprintf(head + hn, sizeof head - (size_t)hn, "%s", cmd);
	put(0, 10, head);
	put(0, x, line);

	double dt = (double)(r->time_ns - l->st.prev.time_ns) / 1e9;
	double rate = dt > 0 ? (double)(r->allocs - l->st.prev.allocs) / dt : 0;
	hp_fmt_size(a, sizeof a, (double)r->alloc_bytes);
	snprintf(line, sizeof line,
		 "allocations %" PRIu64 " (%.0f/s), %s   frees %" PRIu64 " (+%" PRIu64
		 " of older blocks)",
		 r->allocs, rate, a, r->frees, r->untracked_frees);
	put(1, 0, line);

	hp_fmt_size(a, sizeof a, (double)r->live_bytes);
	hp_fmt_size(b, sizeof b, (double)l->st.peak_live_bytes);
	hp_fmt_size(c, sizeof c, (double)r->rss_bytes);
	hp_fmt_size(d, sizeof d, (double)r->payload_bytes);
	snprintf(line, sizeof line, "live %" PRIu64 " blocks, %s   peak %s   RSS %s   heapprof %s",
		 r->live_blocks, a, b, c, d);
	put(2, 0, line);

	uint64_t vals[SPARK_MAX];
	size_t n = l->nspark < SPARK_MAX ? l->nspark : SPARK_MAX;
	uint64_t lo = UINT64_MAX, hi = 0;
	for (size_t i = 0; i < n; i++) {
		vals[i] = l->spark[(l->nspark - n + i) % SPARK_MAX];
		lo = vals[i] < lo ? vals[i] : lo;
		hi = vals[i] > hi ? vals[i] : hi;
	}
	hp_fmt_size(a, sizeof a, n ? (double)lo : 0);
	hp_fmt_size(b, sizeof b, (double)hi);
	snprintf(e, sizeof e, " %s..%s", a, b);
	put(3, 0, "live");
	int width = COLS - 6 - (int)strlen(e);
	if (width > 0) {
		char spark[SPARK_MAX * 3 + 1];
		size_t cells = (size_t)width < n ? (size_t)width : n;
		hp_sparkline(spark, l->utf8 ? cells * 3 + 1 : cells + 1, vals + (n - cells), cells,
			     l->utf8);
		put(3, 6, spark);
		put(3, 6 + (int)cells, e);
	}

	static const char *const modes[] = {"?", "basic", "extended", "full"};
	uint32_t mode = l->st.hello.mode <= HP_MODE_FULL ? l->st.hello.mode : 0;
	if (l->st.hello.sample_rate)
		snprintf(a, sizeof a, ", sampling 1 in %" PRIu64 " bytes", l->st.hello.sample_rate);
	else
		a[0] = '\0';
	snprintf(line, sizeof line, "mode %s%s%s%s   profile %s", modes[mode], a,
		 l->st.sampled ? ", SAMPLED (--max-memory reached)" : "",
		 l->st.cut_stacks ? ", STACKS CUT (stack table full)" : "", l->file);
	put(4, 0, line);
}

static void draw_table(struct live *l)
{
	char title[160], line[128];
	snprintf(title, sizeof title, "Sites by %s: %zu", sort_title[l->sort], l->nrows);
	attron(A_BOLD);
	put(HEADER_ROWS - 1, 0, title);
	attroff(A_BOLD);

	attron(A_REVERSE);
	mvhline(HEADER_ROWS, 0, ' ', COLS);
	put(HEADER_ROWS, 0, "    LIVE  BLOCKS  ALLOC/S   GROWTH     TEMP    ALLOCS  SITE");
	attroff(A_REVERSE);

	size_t vis = table_rows();
	for (size_t i = 0; i < vis && l->scroll + i < l->nrows; i++) {
		const struct row *w = &l->rows[l->scroll + i];
		char live[16], rate[16], growth[16];
		hp_fmt_size(live, sizeof live, (double)w->live);
		hp_fmt_size(rate, sizeof rate, w->rate);
		hp_fmt_signed_size(growth, sizeof growth, w->growth);
		snprintf(line, sizeof line, "%8s %7" PRIu64 " %8s %8s %8" PRIu64 " %9" PRIu64 "  ",
			 live, w->blocks, rate, growth, w->temp, w->allocs);
		int y = HEADER_ROWS + 1 + (int)i;
		put(y, 0, line);
		put(y, (int)strlen(line), w->label);
	}
}

static void draw_status(struct live *l)
{
	char line[256];
	if (l->notice[0])
		snprintf(line, sizeof line, " %s", l->notice);
	else
		snprintf(line, sizeof line,
			 " q detach & quit   l live   a alloc rate   g growth   t temporary   %s "
			 "scroll",
			 l->utf8 ? "\u2191\u2193" : "arrows");
	attron(A_REVERSE);
	mvhline(LINES - 1, 0, ' ', COLS);
	put(LINES - 1, 0, line);
	attroff(A_REVERSE);
}

static void draw(struct live *l)
{
	erase();
	draw_header(l);
	draw_table(l);
	draw_status(l);
	refresh();
}

static void live_start(struct hp_display *d, const struct hp_target_desc *t)
{
	struct live *l = d->priv;
	l->pid = (int)t->pid;
	snprintf(l->cmd, sizeof l->cmd, "%s", t->cmdline[0] ? t->cmdline : t->comm);
	l->file = strdup(t->file);
	if (!l->file)
		l->file = strdup("?");
	snprintf(l->notice, sizeof l->notice, "waiting for the first round...");
	draw(l);
}

static void live_round(struct hp_display *d, const struct hp_stats *st,
		       const struct hp_site_table *sites)
{
	struct live *l = d->priv;
	bool first = l->st.rounds == 0;
	l->st = *st;
	l->spark[l->nspark++ % SPARK_MAX] = st->last.live_bytes;
	if (!l->detaching)
		l->notice[0] = '\0';

	if (sites->n > l->cap) {
		struct row *rows = realloc(l->rows, sites->n * sizeof *rows);
		if (rows) {
			l->rows = rows;
			l->cap = sites->n;
		}
	}
	l->nrows = 0;
	for (size_t i = 0; i < sites->n && l->nrows < l->cap; i++) {
		const struct hp_site *s = &sites->v[i];
		if (s->allocs == 0)
			continue;
		l->rows[l->nrows++] = (struct row){
		    .label = s->label,
		    .live = hp_site_live_bytes(s),
		    .blocks = hp_site_live_blocks(s),
		    .allocs = s->allocs,
		    .temp = s->temp_frees,
		    .rate = s->alloc_rate,
		    .growth = s->growth,
		};
	}
	sort_rows(l);
	clamp_scroll(l);
	/* heapprof-attach's own message may have landed on the screen as the view started. */
	if (first)
		clearok(curscr, TRUE);
	draw(l);
}

static enum hp_input live_input(struct hp_display *d)
{
	struct live *l = d->priv;
	enum hp_input ret = HP_INPUT_NONE;
	size_t page = table_rows() ? table_rows() : 1;
	int ch;
	while ((ch = getch()) != ERR) {
		switch (ch) {
		case 'q':
		case 'Q':
			if (!l->detaching)
				ret = HP_INPUT_DETACH;
			break;
		case 'l':
			l->sort = SORT_LIVE;
			break;
		case 'a':
			l->sort = SORT_RATE;
			break;
		case 'g':
			l->sort = SORT_GROWTH;
			break;
		case 't':
			l->sort = SORT_TEMP;
			break;
		case KEY_UP:
			l->scroll -= l->scroll > 0;
			break;
		case KEY_DOWN:
			l->scroll++;
			break;
		case KEY_PPAGE:
			l->scroll = l->scroll > page ? l->scroll - page : 0;
			break;
		case KEY_NPAGE:
			l->scroll += page;
			break;
		case KEY_HOME:
			l->scroll = 0;
			break;
		case KEY_END:
			l->scroll = l->nrows;
			break;
		case 12: /* Ctrl-L */
			clearok(curscr, TRUE);
			break;
		default: /* KEY_RESIZE included: curses has the new size already */
			break;
		}
	}
	sort_rows(l);
	clamp_scroll(l);
	draw(l);
	return ret;
}

static void live_notice(struct hp_display *d, const char *msg)
{
	struct live *l = d->priv;
	if (strncmp(msg, "detaching", 9) == 0) {
		l->detaching = true;
		snprintf(l->notice, sizeof l->notice,
			 "%s waiting for the last round and the profile",
			 l->utf8 ? "detaching\u2026" : "detaching...");
	} else {
		snprintf(l->notice, sizeof l->notice, "%s", msg);
	}
	draw(l);
}

static void live_close(struct hp_display *d)
{
	struct live *l = d->priv;
	if (!l)
		return;
	leave_screen();
	delscreen(l->scr);
	free(l->rows);
	free(l->file);
	free(l);
	d->priv = NULL;
}

static void live_finish(struct hp_display *d, const struct hp_stats *st,
			const struct hp_site_stat *sites, size_t nsites, const char *file)
{
	live_close(d);
	/* The summary stays on the terminal once the view is gone. */
	struct hp_display summary;
	hp_display_lines_init(&summary, stdout);
	summary.finish(&summary, st, sites, nsites, file);
}

int hp_display_live_init(struct hp_display *d)
{
	if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO) ||
	    tcgetattr(STDOUT_FILENO, &term_saved) < 0)
		return -1;
	struct live *l = calloc(1, sizeof *l);
	if (!l)
		return -1;

	/* Only the character type: the batch format and the summary keep "1.500". */
	setlocale(LC_CTYPE, "");
	l->utf8 = strcmp(nl_langinfo(CODESET), "UTF-8") == 0;

	/* Ours before curses looks: it installs its own (exit(1)) only over the default. */
	struct sigaction sa = {.sa_handler = on_sigterm};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);

	l->scr = newterm(NULL, stdout, stdin);
	if (!l->scr) {
		free(l);
		return -1;
	}
	append_cap("sgr0");
	append_cap("cnorm");
	append_cap("rmkx");
	append_cap("rmcup");
	term_active = 1;
	atexit(at_exit);

	cbreak(); /* not raw: Ctrl-C still reaches heapprof-attach, which detaches */
	noecho();
	nodelay(stdscr, TRUE);
	keypad(stdscr, TRUE);
	curs_set(0);

	hp_display_lines_init(d, stdout);
	d->start = live_start;
	d->round = live_round;
	d->input = live_input;
	d->notice = live_notice;
	d->finish = live_finish;
	d->close = live_close;
	d->input_fd = STDIN_FILENO;
	d->wants_rates = true;
	d->priv = l;
	return 0;
}
