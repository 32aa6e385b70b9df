# src/: the three commands and the code they share (src/common).
noinst_LIBRARIES += src/common/libhpcommon.a
src_common_libhpcommon_a_SOURCES = \
	src/common/hpformat.h src/common/hpabi.h \
	src/common/hpstream.c src/common/hpstream.h \
	src/common/hppaths.c src/common/hppaths.h \
	src/common/hperror.c src/common/hperror.h
