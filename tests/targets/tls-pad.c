/* tls-pad.c - a library holding one initial-exec TLS word and its reader, whose access
 * makes the library need static TLS (DF_STATIC_TLS): mt-target loads copies of it to use
 * up glibc's static TLS (MT_TARGET_TLS_PAD). */
__thread unsigned long tls_pad __attribute__((tls_model("initial-exec")));

unsigned long tls_pad_read(void);
unsigned long tls_pad_read(void)
{
	return tls_pad;
}
