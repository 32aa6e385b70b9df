/* late-symbols.h - names, when a profile is viewed, the frames its viewer left unnamed.
 *
 * Contract: pf_name_unnamed gives every stack frame that has no SYMBOL record a symbol
 * resolved from its module's file on this machine (the symbolizer of viewer/symbolize.h,
 * paths as the profile gives them, debug info along HEAPPROF_DEBUGINFO_PATH), and only
 * from a file whose build-id is the one the profile recorded for the module: a file
 * rebuilt since would name another build's code. A viewer that was killed leaves a
 * stack's outer frames so, since it names them when the session ends. Returns how many
 * addresses it named (0 when none was unnamed or none could be), or -1 when out of memory.
 * Call it after pf_load and before pf_apply_style, which rewrites the names.
 */
#ifndef HEAPPROF_VIEW_LATE_SYMBOLS_H
#define HEAPPROF_VIEW_LATE_SYMBOLS_H

#include <sys/types.h>

#include "profile.h"

ssize_t pf_name_unnamed(struct profile *p);

#endif
