/* records.h - one viewer session: the stream's records in, the profile file out.
 *
 * Contract: hp_vs_record takes the stream's records in order. It checks each one against
 * hpformat.h (every count against the record's length; HELLO first; no viewer-only
 * records), copies it to the profile, reports modules to the symbolizer and, after a
 * STACK, writes one SYMBOL per frame address not yet symbolized in the module that owns
 * it now: at once for the frames up to the stack's call site, for the others before the
 * next MODULE or END record (hpformat.h). SITES entries count for the call site of their stack
 * (sites.h); ROUND records close a round there, update the statistics and go to the display.
 * hp_vs_finish appends END (target exit) if the stream had none and shows the summary.
 */
#ifndef HEAPPROF_VIEWER_RECORDS_H
#define HEAPPROF_VIEWER_RECORDS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "hperror.h"
#include "keymap.h"
#include "profile-writer.h"
#include "report.h"
#include "sites.h"
#include "symbolize.h"

#define HP_TOP_SITES 5

struct hp_vs_addr; /* a symbolized (address, module) */

struct hp_viewer_session {
	struct hp_symbolizer *sym;
	struct hp_profile_writer *pw;
	struct hp_display *disp;
	const char *output;
	struct hp_stats stats;
	struct hp_site_table sites;
	bool seen_hello, seen_end;
	struct hp_keymap addr_index; /* (addr, module id) -> addrs[] */
	struct hp_vs_addr *addrs;
	size_t naddrs, addrs_cap;
	uint32_t *pending; /* addrs[] not symbolized yet */
	size_t npending, pending_cap;
	/* Each stack's call site as its index in the site table + 1, 0 for none. The payload
	 * numbers stacks 1, 2, 3...: an array by id costs 4 bytes a stack where a map costs
	 * 16 times more, which an hour of a busy server (millions of stacks) would feel.
	 * Ids far beyond the stacks seen go to a map, so a stream cannot make the array
	 * larger than a few times its own stacks. */
	uint32_t *stack_site;
	size_t stack_site_cap;
	struct hp_keymap sparse_stack_site; /* (stack id, 0) -> site + 1 */
	size_t nstacks;			    /* STACK records seen */
};

/* 0, or -1 when out of memory. pid 0: module paths are opened as given. */
int hp_vs_init(struct hp_viewer_session *vs, pid_t pid, struct hp_profile_writer *pw,
	       struct hp_display *disp, const char *output);
/* 0, or -1 with err set (malformed record, or the profile cannot be written). */
int hp_vs_record(struct hp_viewer_session *vs, uint32_t type, const uint8_t *body, uint32_t len,
		 struct hp_error *err);
/* Called once when the stream ends, at a record boundary or (reason HP_END_CUT_SHORT)
 * inside a record; reason goes into the END record when the payload wrote none. 0, or -1
 * with err set. */
int hp_vs_finish(struct hp_viewer_session *vs, uint32_t reason, struct hp_error *err);
void hp_vs_free(struct hp_viewer_session *vs);

#endif
