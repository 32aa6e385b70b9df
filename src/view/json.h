/* json.h - a small streaming JSON writer.
 *
 * Contract: calls must nest correctly (begin/end pairs, a key before every value inside an
 * object); the writer adds commas, indentation and a final newline. Strings are emitted as
 * strict JSON whatever bytes they hold: quotes, backslashes and control characters are
 * escaped, and bytes that are not valid UTF-8 become U+FFFD, so the output always parses.
 * 64-bit integers are written exactly; addresses are strings ("0x...") so that readers with
 * double-precision numbers do not round them.
 */
#ifndef HEAPPROF_VIEW_JSON_H
#define HEAPPROF_VIEW_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 32

struct json {
	FILE *f;
	int depth;
	int count[JSON_MAX_DEPTH]; /* values written at each level, for commas */
	int after_key;
};

void json_init(struct json *j, FILE *f);
void json_object_begin(struct json *j);
void json_object_end(struct json *j);
void json_array_begin(struct json *j);
void json_array_end(struct json *j);
void json_key(struct json *j, const char *key);

/* s == NULL writes null. */
void json_str(struct json *j, const char *s);
void json_strn(struct json *j, const char *s, size_t len);
void json_u64(struct json *j, uint64_t v);
void json_i64(struct json *j, int64_t v);
/* Non-finite values write null. */
void json_double(struct json *j, double v, int decimals);
void json_bool(struct json *j, int v);
void json_null(struct json *j);
void json_hex(struct json *j, uint64_t v);

/* Writes the escaped string body (no quotes) of len bytes to f. */
void json_escape(FILE *f, const char *s, size_t len);

/* Key and value together. */
void json_kv_str(struct json *j, const char *key, const char *s);
void json_kv_u64(struct json *j, const char *key, uint64_t v);
void json_kv_i64(struct json *j, const char *key, int64_t v);

#endif
