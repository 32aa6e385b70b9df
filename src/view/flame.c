/* flame: a self-contained SVG flame graph (inline script and style, no external resources):
 * hover a frame for its numbers, click to zoom into it. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "calltree.h"
#include "flame.h"
#include "text.h"
#include "view.h"

#define SVG_WIDTH 1200
#define SVG_PAD 10
#define FRAME_H 16
#define TOP_PAD 40
#define BOTTOM_PAD 30
#define MIN_PX 0.1 /* narrower frames are left out: they would not show */
#define CHAR_PX 7.0

static const char *const type_names[CT_NVAL] = {"allocations", "bytes", "live bytes"};

/* Live bytes can be negative in a damaged profile; a graph of widths needs them >= 0. */
void flame_values(const struct profile *p, const struct pf_stack *st, int64_t v[CT_NVAL], void *ctx)
{
	ct_totals(p, st, v, ctx);
	if (v[CT_LIVE] < 0)
		v[CT_LIVE] = 0;
}

static void xml_escape(FILE *f, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '&':
			fputs("&amp;", f);
			break;
		case '<':
			fputs("&lt;", f);
			break;
		case '>':
			fputs("&gt;", f);
			break;
		case '"':
			fputs("&quot;", f);
			break;
		default:
			fputc(*s, f);
		}
	}
}

struct svg {
	FILE *f;
	const struct calltree *t;
	int key;
	double total;
	unsigned max_depth;
	int height;
	int nomem;
};

static unsigned depth_of(struct svg *g, size_t i, unsigned d)
{
	unsigned m = d;
	for (size_t c = g->t->nodes[i].first_child; c != CT_NONE; c = g->t->nodes[c].next_sibling) {
		if ((double)g->t->nodes[c].v[g->key] / g->total * (SVG_WIDTH - 2 * SVG_PAD) <
		    MIN_PX)
			continue;
		unsigned cd = depth_of(g, c, d + 1);
		if (cd > m)
			m = cd;
	}
	return m;
}

static void color(const char *label, int *r, int *gr, int *b)
{
	uint32_t h = 2166136261u;
	for (const unsigned char *s = (const unsigned char *)label; *s && *s != '('; s++)
		h = (h ^ *s) * 16777619u;
	*r = 205 + (int)(h % 50);
	*gr = (int)((h >> 8) % 230);
	*b = (int)((h >> 16) % 55);
}

static void frame(struct svg *g, size_t i, double x, unsigned d)
{
	const struct ct_node *n = &g->t->nodes[i];
	double w = (double)n->v[g->key] / g->total;
	double px = w * (SVG_WIDTH - 2 * SVG_PAD);
	if (px < MIN_PX)
		return;
	char b[32];
	int r, gr, bl;
	color(n->label, &r, &gr, &bl);
	double y = g->height - BOTTOM_PAD - (double)(d + 1) * FRAME_H;
	fprintf(g->f, "<g class=\"f\" data-x=\"%.9f\" data-w=\"%.9f\" data-d=\"%u\"><title>", x, w,
		d);
	xml_escape(g->f, n->label);
	fprintf(g->f, " (%" PRId64 " %s, %.2f%%", n->v[g->key],
		g->key == CT_ALLOCS ? "allocations" : "bytes", 100 * w);
	if (g->key != CT_ALLOCS)
		fprintf(g->f, ", %s", text_bytes(b, sizeof b, (uint64_t)n->v[g->key]));
	fprintf(g->f,
		")</title><rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" "
		"fill=\"rgb(%d,%d,%d)\" rx=\"2\"/><text x=\"%.2f\" y=\"%.1f\">",
		SVG_PAD + x * (SVG_WIDTH - 2 * SVG_PAD), y, px, FRAME_H - 1, r, gr, bl,
		SVG_PAD + x * (SVG_WIDTH - 2 * SVG_PAD) + 3, y + FRAME_H - 4);
	size_t fit = px > 3 * CHAR_PX ? (size_t)((px - 6) / CHAR_PX) : 0;
	if (fit >= strlen(n->label)) {
		xml_escape(g->f, n->label);
	} else if (fit > 2) {
		/* Cut at a character boundary, never inside a UTF-8 sequence. */
		char cut[512];
		size_t k = fit - 2 < sizeof cut - 1 ? fit - 2 : sizeof cut - 1;
		while (k && (n->label[k] & 0xc0) == 0x80)
			k--;
		memcpy(cut, n->label, k);
		cut[k] = '\0';
		xml_escape(g->f, cut);
		fputs("..", g->f);
	}
	fputs("</text></g>\n", g->f);
	size_t nc;
	size_t *c = ct_children(g->t, i, g->key, &nc);
	if (nc && !c)
		g->nomem = 1;
	double cx = x;
	for (size_t k = 0; c && k < nc; k++) {
		frame(g, c[k], cx, d + 1);
		cx += (double)g->t->nodes[c[k]].v[g->key] / g->total;
	}
	free(c);
}

/* Zoom as flamegraph.pl does: the clicked frame fills the width, its ancestors span it
 * all, frames outside it hide. Labels are cut to the width they get. */
static const char script[] =
    "var W=1180,P=10,C=7.0,gs=[],det;\n"
    "function init(){gs=Array.prototype.slice.call(document.querySelectorAll('g.f'));\n"
    " det=document.getElementById('details');\n"
    " gs.forEach(function(g){var t=g.querySelector('title').textContent;\n"
    "  g.setAttribute('data-l',t.replace(/ \\([^()]*\\)$/,''));\n"
    "  g.onclick=function(){zoom(g)};\n"
    "  g.onmouseover=function(){det.textContent=t};\n"
    "  g.onmouseout=function(){det.textContent=' '}});}\n"
    "function num(g,a){return parseFloat(g.getAttribute(a))}\n"
    "function place(g,x,w){var r=g.querySelector('rect'),t=g.querySelector('text'),\n"
    " l=g.getAttribute('data-l'),px=w*W,n=Math.floor((px-6)/C);\n"
    " r.setAttribute('x',P+x*W);r.setAttribute('width',px);t.setAttribute('x',P+x*W+3);\n"
    " t.textContent=px<3*C?'':(n>=l.length?l:l.substring(0,n-2)+'..');}\n"
    "function zoom(z){var zx=num(z,'data-x'),zw=num(z,'data-w'),zd=num(z,'data-d');\n"
    " document.getElementById('unzoom').style.opacity=1;\n"
    " gs.forEach(function(g){var x=num(g,'data-x'),w=num(g,'data-w'),d=num(g,'data-d');\n"
    "  if(x+w<=zx+1e-12||x>=zx+zw-1e-12){g.style.display='none';return;}\n"
    "  g.style.display='';g.style.opacity=d<zd?0.6:1;\n"
    "  if(d<zd)place(g,0,1);else place(g,(x-zx)/zw,w/zw);});}\n"
    "function unzoom(){document.getElementById('unzoom').style.opacity=0;\n"
    " gs.forEach(function(g){g.style.display='';g.style.opacity=1;\n"
    "  place(g,num(g,'data-x'),num(g,'data-w'))});}\n";

int flame_svg(FILE *f, const struct calltree *t, int key, const char *title)
{
	struct svg g = {.f = f, .t = t, .key = key, .total = (double)t->nodes[0].v[key]};
	g.max_depth = g.total > 0 ? depth_of(&g, 0, 0) : 0;
	g.height = TOP_PAD + BOTTOM_PAD + (int)(g.max_depth + 1) * FRAME_H;
	fprintf(f,
		"<?xml version=\"1.0\" standalone=\"no\"?>\n"
		"<svg version=\"1.1\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
		"onload=\"init(evt)\" xmlns=\"http://www.w3.org/2000/svg\">\n"
		"<style>text{font-family:monospace;font-size:12px;fill:#000}"
		"g.f:hover rect{stroke:#000;stroke-width:0.5}g.f{cursor:pointer}</style>\n"
		"<script type=\"text/ecmascript\"><![CDATA[\n%s]]></script>\n"
		"<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#f6f6f0\"/>\n"
		"<text x=\"%d\" y=\"24\" text-anchor=\"middle\" style=\"font-size:16px\">",
		SVG_WIDTH, g.height, SVG_WIDTH, g.height, script, SVG_WIDTH, g.height,
		SVG_WIDTH / 2);
	xml_escape(f, title);
	fprintf(f,
		"</text>\n<text id=\"unzoom\" x=\"%d\" y=\"24\" style=\"opacity:0\" "
		"onclick=\"unzoom()\">Reset zoom</text>\n"
		"<text id=\"details\" x=\"%d\" y=\"%d\"> </text>\n<g id=\"frames\">\n",
		SVG_PAD, SVG_PAD, g.height - 10);
	if (g.total > 0)
		frame(&g, 0, 0, 0);
	fputs("</g>\n</svg>\n", f);
	return g.nomem ? -1 : 0;
}

struct flame_opts {
	int key;
	const char *output;
};

enum { OPT_TYPE = 1, OPT_OUTPUT = 'o' };

static const struct option options[] = {
    {"type", required_argument, NULL, OPT_TYPE},
    {"output", required_argument, NULL, OPT_OUTPUT},
    {0},
};

static int on_opt(int val, const char *arg, void *ctx)
{
	struct flame_opts *o = ctx;
	switch (val) {
	case OPT_TYPE:
		return view_parse_type(&view_cmd_flame, arg, &o->key);
	case OPT_OUTPUT:
		o->output = arg;
		return 0;
	default:
		return VIEW_EXIT_USAGE;
	}
}

static int run(int argc, char **argv)
{
	struct flame_opts o = {.key = CT_ALLOCS};
	struct view_args args;
	int rc = view_parse(&view_cmd_flame, argc, argv, options, on_opt, &o, &args);
	if (rc)
		return rc < 0 ? 0 : rc;
	if (args.json)
		return view_usage_error(&view_cmd_flame,
					"the flame graph is SVG: for the numbers use 'tree --json' "
					"or 'export --format collapsed'");
	struct profile p;
	if (view_load(&args, &p) < 0)
		return VIEW_EXIT_ERROR;
	struct calltree t;
	if (ct_build(&t, &p, 0, flame_values, NULL) < 0) {
		view_error("out of memory building the call tree: free memory and retry");
		pf_free(&p);
		return VIEW_EXIT_ERROR;
	}
	char title[512];
	const char *who = p.session.comm ? p.session.comm : "heapprof";
	char clean[256];
	snprintf(title, sizeof title, "%s: %s", text_clean(clean, sizeof clean, who),
		 type_names[o.key]);
	FILE *f = view_open_output(o.output);
	rc = f ? 0 : VIEW_EXIT_ERROR;
	if (f && flame_svg(f, &t, o.key, title) < 0) {
		view_error("out of memory drawing the flame graph: the output is incomplete");
		rc = VIEW_EXIT_ERROR;
	}
	if (f && view_close_output(f, o.output))
		rc = VIEW_EXIT_ERROR;
	ct_free(&t);
	pf_free(&p);
	return rc;
}

const struct view_cmd view_cmd_flame = {
    .name = "flame",
    .summary = "Draw a flame graph (self-contained SVG: hover for numbers, click to zoom)",
    .options = "  --type KEY       widths by allocations (default), bytes or live\n"
	       "  -o, --output FILE  write the SVG to FILE instead of standard output\n",
    .run = run,
};
