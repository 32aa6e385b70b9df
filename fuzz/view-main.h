/* view-main.h - heapprof-view's main() under the name fuzz-profile calls it by.
 *
 * Contract: fuzz/local.mk compiles src/view/main.c with -Dmain=hp_view_main and
 * pre-includes this header, so the renamed function has its prototype.
 */
#ifndef HEAPPROF_FUZZ_VIEW_MAIN_H
#define HEAPPROF_FUZZ_VIEW_MAIN_H

int hp_view_main(int argc, char **argv);

#endif
