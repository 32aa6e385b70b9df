#include "loc.h"

#include <string.h>

static const char *module_name(const struct profile *p, const struct pf_module *m)
{
	const char *path = m->path;
	/* The main program may be reported with an empty name. */
	if ((!path || !*path) && p->session.exe)
		path = p->session.exe;
	if (!path || !*path)
		return "[unknown]";
	const char *slash = strrchr(path, '/');
	return slash && slash[1] ? slash + 1 : path;
}

uint32_t loc_levels(const struct profile *p, uint64_t addr)
{
	const struct pf_symbol *s = pf_symbol_at(p, addr);
	return s && s->nframes ? s->nframes : 1;
}

void loc_get(const struct profile *p, uint64_t addr, uint32_t level, struct pf_loc *out)
{
	memset(out, 0, sizeof *out);
	out->addr = addr;
	const struct pf_module *m = pf_module_of(p, addr);
	if (m) {
		out->module = module_name(p, m);
		out->offset = addr - m->bias;
	}
	const struct pf_symbol *s = pf_symbol_at(p, addr);
	if (!s || level >= s->nframes)
		return;
	const struct pf_symframe *f = &s->frames[level];
	out->function = f->function;
	out->file = f->file;
	out->line = f->line;
	out->inlined = level + 1 < s->nframes;
	if (out->inlined) {
		const struct pf_symframe *c = &s->frames[level + 1];
		out->caller = c->function;
		out->call_file = c->file;
		out->call_line = c->line;
	}
}

void loc_json(struct json *j, const struct pf_loc *l)
{
	json_object_begin(j);
	json_kv_str(j, "function", l->function);
	json_kv_str(j, "file", l->file);
	json_key(j, "line");
	if (l->line)
		json_u64(j, l->line);
	else
		json_null(j);
	json_kv_str(j, "module", l->module);
	json_key(j, "address");
	json_hex(j, l->addr);
	json_key(j, "inlined");
	json_bool(j, l->inlined);
	json_object_end(j);
}

void loc_json_stack(struct json *j, const struct profile *p, const struct pf_stack *s,
		    uint32_t first)
{
	json_array_begin(j);
	for (uint32_t i = first; i < s->depth; i++) {
		uint32_t n = loc_levels(p, s->frames[i]);
		for (uint32_t k = 0; k < n; k++) {
			struct pf_loc l;
			loc_get(p, s->frames[i], k, &l);
			loc_json(j, &l);
		}
	}
	json_array_end(j);
}
