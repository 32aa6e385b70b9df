/* live.h - the full-screen live view (ncurses) shown when the viewer runs on a terminal.
 *
 * Contract: hp_display_live_init takes over the terminal on stdin/stdout and returns -1,
 * leaving it untouched, when there is none or curses cannot drive it; the caller then
 * uses the line display. From then on the terminal is given back as it was on every way
 * out: close (or finish, which then prints the line display's summary on the restored
 * screen), exit(), and SIGTERM (restored from the handler, then the signal's default
 * action). Keys: l a g t choose the ranking, arrows and PgUp/PgDn/Home/End scroll, q
 * asks to detach (input returns HP_INPUT_DETACH), Ctrl-L redraws.
 */
#ifndef HEAPPROF_VIEWER_LIVE_H
#define HEAPPROF_VIEWER_LIVE_H

#include "report.h"

/* 0, or -1 with nothing changed. */
int hp_display_live_init(struct hp_display *d);

#endif
