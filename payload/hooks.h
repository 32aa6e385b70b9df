/* hooks.h - the replacement functions and the GOT patching that installs them.
 *
 * Contract: hp_hooks_resolve looks up the real function for every hooked name with
 * dlsym(RTLD_DEFAULT) (names not loaded yet stay unresolved and unpatched). hp_patch_all
 * writes each hook into every GOT slot that holds the real function or a lazy PLT stub,
 * in every module but the payload, the dynamic loader and the vdso; besides the
 * allocation functions it hooks dlopen (to patch and announce new modules) and fork (so
 * the child closes its copy of the pipe);
 * hp_unpatch_all writes the real function back wherever a slot holds a hook. Slots are
 * written only inside dl_iterate_phdr callbacks, whose lock serializes all patchers, and
 * patching stops for good once hp_unpatch_all has started.
 */
#ifndef HEAPPROF_HOOKS_H
#define HEAPPROF_HOOKS_H

void hp_hooks_resolve(void);
/* Slots written. */
int hp_patch_all(void);
int hp_unpatch_all(void);
/* Lets hooks record (after start) and re-enables patching for a new session. */
void hp_hooks_arm(void);

#endif
