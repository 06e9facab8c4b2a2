/* SPDX-License-Identifier: MIT */
/*
 * hugepool_jni.c - the JNI glue of the Java binding (java/, hugepool-java(7)): one C function
 * per native method of org.hugepool.Native, each a thin call into libhugepool.
 *
 * Conventions: handles (hp_conn, writers, readers, spill streams) cross into Java as jlong
 * pointers; a call that can fail returns a negative errno (a ticket, LSN, count or pointer
 * otherwise, all below 2^63) and Java builds the exception, reading the daemon's words with
 * lastError under the same lock. The calls that connect throw here (why a connect failed is
 * hp_last_error(NULL), the calling thread's, read in the same native call), and so does status,
 * which returns an object; an argument no Java caller should pass (a null or short array, a range
 * outside a buffer) throws Java's own exception, so every failure leaves one pending or returns
 * an errno. The numbers Java needs (JNI_CONSTANTS) and the status's records (STATUS_*_ARGS) are
 * described here once.
 *
 * Threads and memory: this file's global state is what it looks up once (the classes and
 * methods of `methods`, weakly referenced, the buffer fields), written at load or under
 * methods_lock. Java serialises the calls on each handle (HugePool's lock for a connection and
 * what belongs to it; a writer's own lock for a writer, which has a connection of its own), so
 * nothing else here locks. Buffers are released with hp_release_keep_range, never hp_release: a
 * ByteBuffer Java handed out may outlive the lease, and the range it points at must stay
 * mapped (private zeroes) until Java's Cleaner calls unmap. Java arrays are copied in with
 * Get*ArrayRegion, never pinned across a call that may block.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <jni.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>

#include "hugepool.h"
#include "org_hugepool_Native.h" /* javac -h: the prototypes, checked against Native.java */

#define BATCH_MAX 1024 /* records in one appendBatch; Java splits larger batches */
#define READ_MAX 64 /* records one readerNext hands over */
/* what append, appendBatch and spillWrite return for a direct buffer they may not read in place
 * (in_place): below every -errno, so Java tells it apart and copies the buffer through Java */
#define NOT_IN_PLACE (-(1 << 20))

/*
 * The numbers both sides use, each defined once, here or in a C header, and read by Java by name
 * when its class Native initialises (Native.constant): the errno values that pick an exception's
 * class, the limits of the calls, the journal and spill states. Java copies none of them; a name
 * it asks for that is missing here fails its class's initialisation.
 */
#define JNI_CONSTANTS(X)                                                                          \
	X(EPERM) X(ENOENT) X(E2BIG) X(EBADF) X(EAGAIN) X(ENOMEM) X(EACCES) X(EINVAL) X(EPIPE)      \
	X(EBADMSG) X(EOVERFLOW) X(EUSERS) X(ECONNRESET) X(ENOTCONN) X(ETIMEDOUT) X(ECONNREFUSED)  \
	X(EDQUOT) X(HP_ACQUIRE_MAX) X(BATCH_MAX) X(READ_MAX) X(HP_JOURNAL_OK) X(HP_JOURNAL_FULL)   \
	X(HP_JOURNAL_FAILED) X(HP_SPILL_FILE) X(HP_SPILL_THRESHOLD_MAX) X(NOT_IN_PLACE)

#define CONSTANT_ROW(name) { #name, (jlong)(name) },
static const struct {
	const char *name;
	jlong value;
} constants[] = { JNI_CONSTANTS(CONSTANT_ROW) };
#undef CONSTANT_ROW

/*
 * The status as Java objects, built here (java_status) from one row per argument of each
 * constructor, in the order of the record's components: S a String (text()), I an int, J a
 * long, Z a boolean, CLASSES and JOURNALS the arrays of records made before. The rows name the
 * fields of struct hp_status, which libhugepool copies by name from proto.h's status tables
 * (PROTO_STATUS_SECTIONS and their field lists). The constructor's JNI signature is made from the
 * same rows (SIG), so count, order and types are written once: a Java record whose components
 * differ fails GetMethodID when the library loads, and the library refuses to load, naming it.
 * A field reaches Java with its row here and its component there, nothing counted by hand.
 */
#define STATUS_CLASS_ARGS(X, cs)                                                                  \
	X(S, (cs)->name) X(J, (cs)->size) X(I, (cs)->total) X(I, (cs)->free) X(I, (cs)->leased)     \
	X(I, (cs)->waiters) X(Z, (cs)->retired) X(J, (cs)->pages.page_size) X(Z, (cs)->pages.hugetlb) \
	X(S, (cs)->pages.fallback_reason)
#define STATUS_JOURNAL_ARGS(X, js)                                                                \
	X(S, (js)->name) X(S, (js)->backend) X(S, (js)->note) X(I, (js)->state) X(J, (js)->next_lsn) \
	X(J, (js)->durable_lsn) X(J, (js)->retain_lsn) X(J, (js)->appends) X(J, (js)->syncs)          \
	X(I, (js)->writers) X(I, (js)->segments) X(J, (js)->segment_size) X(Z, (js)->direct)         \
	X(Z, (js)->config.when_full == HP_JOURNAL_RECYCLE)
#define STATUS_ARGS(X, st, classes, journals)                                                     \
	X(S, (st)->daemon_version) X(I, (st)->daemon_pid) X(J, (st)->page_size) X(Z, (st)->hugetlb)  \
	X(S, (st)->fallback_reason) X(J, (st)->pool_bytes) X(I, (st)->nclients) X(I, (st)->nleases) \
	X(J, (st)->spill.files) X(CLASSES, classes) X(JOURNALS, journals)

#define STATUS_CLASS "org/hugepool/Status$BufferClass"
#define STATUS_JOURNAL "org/hugepool/Status$Journal"
#define SIG_S "Ljava/lang/String;"
#define SIG_I "I"
#define SIG_J "J"
#define SIG_Z "Z"
#define SIG_CLASSES "[L" STATUS_CLASS ";"
#define SIG_JOURNALS "[L" STATUS_JOURNAL ";"
#define SIG(kind, e) SIG_##kind
#define ARG_S(e) { .l = text(env, (e)) }
#define ARG_I(e) { .i = (jint)(e) }
#define ARG_J(e) { .j = (jlong)(e) }
#define ARG_Z(e) { .z = (e) ? JNI_TRUE : JNI_FALSE }
#define ARG_CLASSES(e) { .l = (e) }
#define ARG_JOURNALS(e) { .l = (e) }
#define ARG(kind, e) ARG_##kind(e),

/*
 * The classes and methods looked up once and let go of by JNI_OnUnload: byte[] by JNI_OnLoad,
 * the others when first needed (found()): the exception's at the first throw, the status's at
 * the first status call. Not at load: GetMethodID initialises the class, so HugepoolException
 * would be verified (loading its six subclasses) on every program's first connect, and
 * Status.Journal's initialiser reads Native's constants, which no native call can fetch while
 * the library is still loading.
 */
static struct method {
	const char *class_name, *name, *sig;
	bool is_static;
	jclass k; /* a weak global reference (see lookup) */
	jmethodID m;
} methods[] = {
#define M_BYTES 0 /* byte[]: its class only */
	{ "[B", NULL, NULL, false, NULL, NULL },
#define M_MAPPED 1 /* java.nio.MappedByteBuffer: its class only (in_place) */
	{ "java/nio/MappedByteBuffer", NULL, NULL, false, NULL, NULL },
#define M_LOADED 2 /* the ones before it are looked up at load */
#define M_EXCEPTION 2 /* HugepoolException create(errno, connecting, what, explanation, words) */
	{ "org/hugepool/HugepoolException", "create",
	  "(IZ" SIG_S SIG_S SIG_S ")Lorg/hugepool/HugepoolException;", true, NULL, NULL },
#define M_CLASS 3
	{ STATUS_CLASS, "<init>", "(" STATUS_CLASS_ARGS(SIG, 0) ")V", false, NULL, NULL },
#define M_JOURNAL 4
	{ STATUS_JOURNAL, "<init>", "(" STATUS_JOURNAL_ARGS(SIG, 0) ")V", false, NULL, NULL },
#define M_STATUS 5 /* static Status of(...) */
	{ "org/hugepool/Status", "of", "(" STATUS_ARGS(SIG, 0, 0, 0) ")Lorg/hugepool/Status;", true, NULL, NULL },
#define M_ALL 6
};
static pthread_mutex_t methods_lock = PTHREAD_MUTEX_INITIALIZER; /* guards the lookups after load */

/*
 * java.nio.Buffer's `segment` (set when the buffer is a view of a MemorySegment: Java 17's
 * incubating API, 21's preview, 22's final one) and MappedByteBuffer's `fd` (set when it maps a
 * file), found by JNI_OnLoad where this JDK has them: the JDK's own fields, the only way native
 * code can tell such a buffer (in_place) without java.lang.foreign, whose first use costs a fresh
 * JVM tens of milliseconds. NULL where not found; then Java asks (BufferViews).
 */
static jfieldID buffer_segment, buffer_fd;

/* Look methods [from, to) up: true, or false with an exception pending. */
static bool lookup(JNIEnv *env, size_t from, size_t to)
{
	for (size_t i = from; i < to; i++) {
		struct method *m = &methods[i];
		jclass k = (*env)->FindClass(env, m->class_name);

		/* weak: a global reference to a class of the class loader that loaded this library
		 * would keep that loader, so the library, from ever being collected, and JNI_OnUnload
		 * from ever running. Used as is: the classes cannot go while their loader lives, and
		 * it lives while one of its classes (Native) calls in here. */
		if (!k || !(m->k = (*env)->NewWeakGlobalRef(env, k)))
			return false; /* NoClassDefFoundError or OutOfMemoryError pending */
		(*env)->DeleteLocalRef(env, k);
		if (m->name && !(m->m = m->is_static ? (*env)->GetStaticMethodID(env, m->k, m->name, m->sig)
						     : (*env)->GetMethodID(env, m->k, m->name, m->sig)))
			return false; /* NoSuchMethodError pending: a record differs from its rows */
	}
	return true;
}

/* A field of a JDK class by name and type, or NULL, no exception pending, where this JDK has none. */
static jfieldID field(JNIEnv *env, const char *class_name, const char *name, const char *sig)
{
	jclass k = (*env)->FindClass(env, class_name);
	jfieldID f = k ? (*env)->GetFieldID(env, k, name, sig) : NULL;

	if (!f)
		(*env)->ExceptionClear(env);
	if (k)
		(*env)->DeleteLocalRef(env, k);
	return f;
}

/* Methods [from, to) looked up, once: true, or false with an exception pending. */
static bool found(JNIEnv *env, size_t from, size_t to)
{
	bool ok = true;

	pthread_mutex_lock(&methods_lock);
	if (!methods[to - 1].k) {
		for (size_t i = from; i < to; i++) {
			if (methods[i].k)
				(*env)->DeleteWeakGlobalRef(env, methods[i].k); /* of a lookup that failed */
			methods[i].k = NULL;
		}
		ok = lookup(env, from, to);
		if (!ok && methods[to - 1].k) {
			(*env)->DeleteWeakGlobalRef(env, methods[to - 1].k);
			methods[to - 1].k = NULL;
		}
	}
	pthread_mutex_unlock(&methods_lock);
	return ok;
}

/* A journal writer: its own connection (its waits watch the socket) and a copy area for arrays. */
struct writer {
	hp_conn *c;
	hp_journal *j;
	char *scratch;
	size_t cap;
};

/* A journal reader and the record it read but could not yet hand over (it did not fit). */
struct reader {
	hp_journal_reader *r;
	bool pending;
	uint64_t lsn;
	const void *data;
	size_t len;
	int err; /* an error met after records were handed over: the next call's */
};

/* A spill stream and where arrays are copied through on their way in. */
#define SPILL_SCRATCH (64u << 10)
struct spill {
	hp_spill *s;
	char scratch[SPILL_SCRATCH];
};

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM *vm, void *reserved)
{
	static char none;
	JNIEnv *env;
	jobject b;
	(void)reserved;

	if ((*vm)->GetEnv(vm, (void **)&env, JNI_VERSION_1_8) != JNI_OK)
		return JNI_ERR;
	if (!lookup(env, 0, M_LOADED))
		return JNI_ERR;
	buffer_segment = field(env, "java/nio/Buffer", "segment", "Ljava/lang/foreign/MemorySegment;");
	if (!buffer_segment)
		buffer_segment = field(env, "java/nio/Buffer", "segment", "Ljdk/internal/access/foreign/MemorySegmentProxy;");
	buffer_fd = field(env, "java/nio/MappedByteBuffer", "fd", "Ljava/io/FileDescriptor;");
	/* the JVM readies its direct buffer support at the first NewDirectByteBuffer (0.3 ms):
	 * here, with the library's loading, rather than in the first acquire */
	if (!(b = (*env)->NewDirectByteBuffer(env, &none, 0)))
		return JNI_ERR;
	(*env)->DeleteLocalRef(env, b);
	return JNI_VERSION_1_8;
}

/* Whether native code checks direct buffers itself (in_place): Native.CHECKS_BUFFERS. */
JNIEXPORT jboolean JNICALL Java_org_hugepool_Native_checksBuffers(JNIEnv *env, jclass k)
{
	(void)env, (void)k;
	return buffer_segment && buffer_fd;
}

/* The class loader that loaded this library is being collected: let go of its classes. */
JNIEXPORT void JNICALL JNI_OnUnload(JavaVM *vm, void *reserved)
{
	JNIEnv *env;
	(void)reserved;

	if ((*vm)->GetEnv(vm, (void **)&env, JNI_VERSION_1_8) != JNI_OK)
		return;
	for (size_t i = 0; i < M_ALL; i++) {
		if (methods[i].k)
			(*env)->DeleteWeakGlobalRef(env, methods[i].k);
		methods[i].k = NULL;
		methods[i].m = NULL;
	}
	buffer_segment = buffer_fd = NULL;
}

/* Throw a new exception of class name (java/lang/...) with message msg; false, for returning. */
static bool throw_new(JNIEnv *env, const char *name, const char *msg)
{
	jclass k = (*env)->FindClass(env, name);

	if (k)
		(*env)->ThrowNew(env, k, msg);
	return false;
}

/*
 * A Java string as a C string the caller frees, in *ret (NULL for null): true, or false with an
 * exception pending (OutOfMemoryError) when memory is short.
 */
static bool utf(JNIEnv *env, jstring s, char **ret)
{
	const char *u;

	*ret = NULL;
	if (!s)
		return true;
	u = (*env)->GetStringUTFChars(env, s, NULL);
	if (!u)
		return false; /* OutOfMemoryError pending */
	*ret = strdup(u);
	(*env)->ReleaseStringUTFChars(env, s, u);
	if (!*ret)
		return throw_new(env, "java/lang/OutOfMemoryError", "copying a string for libhugepool");
	return true;
}

/*
 * A Java string of text from the library or the daemon (an untrusted peer): bytes outside
 * printable ASCII become '?', so JNI's modified UTF-8 never sees a malformed sequence. NULL with
 * OutOfMemoryError pending when memory is short.
 */
static jstring text(JNIEnv *env, const char *s)
{
	char buf[1024];
	size_t i = 0;

	for (; s && s[i] && i < sizeof(buf) - 1; i++)
		buf[i] = (unsigned char)s[i] >= 0x20 && (unsigned char)s[i] < 0x7f ? s[i] : '?';
	buf[i] = '\0';
	return (*env)->NewStringUTF(env, buf);
}

/*
 * Throw HugepoolException.create(err, connecting, what, hp_strerror(err), words): its class is
 * chosen by the errno (and, for ENOENT and ECONNREFUSED, by whether it was a connect). Always
 * leaves an exception pending.
 */
static void throw_hp(JNIEnv *env, int err, bool connecting, const char *what, const char *words)
{
	const struct method *c = &methods[M_EXCEPTION];
	jstring w = found(env, M_EXCEPTION, M_EXCEPTION + 1) ? text(env, what) : NULL;
	jstring m = w ? text(env, hp_strerror(err)) : NULL;
	jstring d = m ? text(env, words) : NULL;
	jobject e;

	if (!d)
		return; /* OutOfMemoryError pending */
	e = (*env)->CallStaticObjectMethod(env, c->k, c->m, (jint)-err, (jboolean)connecting, w, m, d);
	if (e && !(*env)->ExceptionCheck(env))
		(*env)->Throw(env, e);
}

/*
 * Whether [off, off + len) lies within array a (Java checked it first: this is the second line),
 * else false with NullPointerException or IndexOutOfBoundsException pending.
 */
static bool array_range(JNIEnv *env, jarray a, jint off, jint len)
{
	if (!a)
		return throw_new(env, "java/lang/NullPointerException", "a null array");
	if (off < 0 || len < 0 || (jlong)off + len > (*env)->GetArrayLength(env, a))
		return throw_new(env, "java/lang/IndexOutOfBoundsException", "the range is outside the array");
	return true;
}

/*
 * Whether native code may read the direct buffer buf in place: not a view of a MemorySegment (its
 * Arena may close, and free or unmap the memory under it, at any moment) nor of a file mapping (a
 * truncate turns a read into SIGBUS). Java copies those through its own accessors, which check
 * the Arena atomically with its close and turn a vanished page into InternalError.
 */
static bool in_place(JNIEnv *env, jobject buf)
{
	jobject o;

	if (buffer_segment && (o = (*env)->GetObjectField(env, buf, buffer_segment))) {
		(*env)->DeleteLocalRef(env, o);
		return false;
	}
	if (buffer_fd && (*env)->IsInstanceOf(env, buf, methods[M_MAPPED].k) &&
	    (o = (*env)->GetObjectField(env, buf, buffer_fd))) {
		(*env)->DeleteLocalRef(env, o);
		return false;
	}
	return true;
}

/* The address of a direct buffer's bytes [off, off + len), or NULL (an exception pending). */
static char *direct(JNIEnv *env, jobject buf, jint off, jint len)
{
	char *p;

	if (!buf) {
		throw_new(env, "java/lang/NullPointerException", "a null buffer");
		return NULL;
	}
	p = (*env)->GetDirectBufferAddress(env, buf);
	if (!p || off < 0 || len < 0 || (jlong)off + len > (*env)->GetDirectBufferCapacity(env, buf)) {
		throw_new(env, "java/lang/IllegalArgumentException", "not a direct buffer, or the range is outside it");
		return NULL;
	}
	return p + off;
}

/* ---- connection ---- */

JNIEXPORT jlong JNICALL Java_org_hugepool_Native_connect(JNIEnv *env, jclass k, jstring socket)
{
	hp_conn *c;
	char *path;
	int r;
	(void)k;

	if (!utf(env, socket, &path))
		return 0;
	r = hp_connect(path, &c);
	if (r < 0) {
		throw_hp(env, r, true, "connecting to hugepoold", hp_last_error(NULL));
		free(path);
		return 0;
	}
	free(path);
	return (jlong)(uintptr_t)c;
}

JNIEXPORT void JNICALL Java_org_hugepool_Native_disconnect(JNIEnv *env, jclass k, jlong c)
{
	(void)env, (void)k;
	hp_disconnect((hp_conn *)(uintptr_t)c);
}

JNIEXPORT jstring JNICALL Java_org_hugepool_Native_lastError(JNIEnv *env, jclass k, jlong c)
{
	(void)k;
	return text(env, hp_last_error((hp_conn *)(uintptr_t)c));
}

JNIEXPORT jstring JNICALL Java_org_hugepool_Native_strerror(JNIEnv *env, jclass k, jint err)
{
	(void)k;
	return text(env, hp_strerror(-err));
}

/* A number of JNI_CONSTANTS by its name; IllegalArgumentException for a name not there. */
JNIEXPORT jlong JNICALL Java_org_hugepool_Native_constant(JNIEnv *env, jclass k, jstring name)
{
	char *n;
	(void)k;

	if (!name) {
		throw_new(env, "java/lang/NullPointerException", "a null constant name");
		return 0;
	}
	if (!utf(env, name, &n))
		return 0;
	for (size_t i = 0; i < sizeof(constants) / sizeof(constants[0]); i++) {
		if (strcmp(constants[i].name, n) == 0) {
			free(n);
			return constants[i].value;
		}
	}
	free(n);
	throw_new(env, "java/lang/IllegalArgumentException", "no such constant in hugepool_jni.c's JNI_CONSTANTS");
	return 0;
}

/* A journal state's name (hp_journal_state_name): "ok", "full", "failed", "unknown". */
JNIEXPORT jstring JNICALL Java_org_hugepool_Native_journalStateName(JNIEnv *env, jclass k, jint state)
{
	(void)k;
	return text(env, hp_journal_state_name(state));
}

JNIEXPORT jstring JNICALL Java_org_hugepool_Native_errnoName(JNIEnv *env, jclass k, jint err)
{
	const char *n = strerrorname_np(err);
	(void)k;

	return n ? text(env, n) : NULL;
}

/* ---- buffers ---- */

/* Lease n buffers: out gets addr, size, lease id for each; 0 or -errno. */
JNIEXPORT jint JNICALL Java_org_hugepool_Native_acquire(JNIEnv *env, jclass k, jlong c, jstring cls, jint n,
							jlong timeout_ms, jlongArray out)
{
	struct hp_buffer *b;
	jlong *v;
	char *name;
	int r;
	(void)k;

	if (n <= 0 || n > HP_ACQUIRE_MAX)
		return -EINVAL;
	if (!out || (*env)->GetArrayLength(env, out) != 3 * n) {
		throw_new(env, "java/lang/IllegalArgumentException", "acquire's out array is not 3 longs a buffer");
		return -EINVAL;
	}
	if (!utf(env, cls, &name))
		return -ENOMEM;
	b = calloc((size_t)n, sizeof(*b));
	v = calloc((size_t)n * 3, sizeof(*v));
	if (!b || !v) {
		r = -ENOMEM;
		goto out;
	}
	r = hp_acquire((hp_conn *)(uintptr_t)c, name, (unsigned)n, timeout_ms, b);
	if (r == 0) {
		for (jint i = 0; i < n; i++) {
			v[3 * i] = (jlong)(uintptr_t)b[i].addr;
			v[3 * i + 1] = (jlong)b[i].size;
			v[3 * i + 2] = (jlong)b[i].lease_id;
		}
		(*env)->SetLongArrayRegion(env, out, 0, 3 * n, v);
	}
out:
	free(name);
	free(b);
	free(v);
	return r;
}

/* Release the buffers acquire described in lease (addr, size, id each), keeping their ranges. */
JNIEXPORT jint JNICALL Java_org_hugepool_Native_release(JNIEnv *env, jclass k, jlong c, jlongArray lease)
{
	jsize len = lease ? (*env)->GetArrayLength(env, lease) : 0;
	unsigned n = (unsigned)len / 3;
	struct hp_buffer *b;
	jlong *v;
	int r;
	(void)k;

	if (n == 0 || n > HP_ACQUIRE_MAX || len % 3) {
		throw_new(env, "java/lang/IllegalArgumentException", "a lease is 3 longs a buffer, 1 to HP_ACQUIRE_MAX");
		return -EINVAL;
	}
	b = calloc(n, sizeof(*b));
	v = calloc((size_t)n * 3, sizeof(*v));
	if (!b || !v) {
		free(b);
		free(v);
		return -ENOMEM;
	}
	(*env)->GetLongArrayRegion(env, lease, 0, (jsize)(3 * n), v);
	for (unsigned i = 0; i < n; i++)
		b[i] = (struct hp_buffer){ .addr = (void *)(uintptr_t)v[3 * i], .size = (size_t)v[3 * i + 1],
					   .lease_id = (uint64_t)v[3 * i + 2] };
	r = hp_release_keep_range((hp_conn *)(uintptr_t)c, b, n);
	free(b);
	free(v);
	return r;
}

/* A direct ByteBuffer over [addr, addr + len) (len <= Integer.MAX_VALUE). */
JNIEXPORT jobject JNICALL Java_org_hugepool_Native_wrap(JNIEnv *env, jclass k, jlong addr, jlong len)
{
	(void)k;
	return (*env)->NewDirectByteBuffer(env, (void *)(uintptr_t)addr, len);
}

/* The end of a released range: Java's Cleaner, once no ByteBuffer over it is reachable. */
JNIEXPORT void JNICALL Java_org_hugepool_Native_unmap(JNIEnv *env, jclass k, jlong addr, jlong len)
{
	(void)env, (void)k;
	munmap((void *)(uintptr_t)addr, (size_t)len);
}

/* ---- status ---- */

/* One record of the status, its arguments from rows (see STATUS_CLASS_ARGS), or NULL with an
 * exception pending. A local frame frees the strings made for it. */
#define STATUS_RECORD(method, ARGS, v)                                                            \
	do {                                                                                      \
		jobject o_ = NULL;                                                                \
		if ((*env)->PushLocalFrame(env, 16) < 0)                                           \
			goto out;                                                                 \
		{                                                                                 \
			jvalue a_[] = { ARGS(ARG, v) };                                           \
			if (!(*env)->ExceptionCheck(env))                                         \
				o_ = (*env)->NewObjectA(env, methods[method].k, methods[method].m, a_); \
		}                                                                                 \
		(v##_obj) = (*env)->PopLocalFrame(env, o_);                                         \
	} while (0)

/* The daemon's status as an org.hugepool.Status; NULL with the exception pending on failure. */
JNIEXPORT jobject JNICALL Java_org_hugepool_Native_status(JNIEnv *env, jclass k, jlong c)
{
	hp_conn *conn = (hp_conn *)(uintptr_t)c;
	struct hp_status *st;
	jobjectArray classes = NULL, journals = NULL;
	jobject status = NULL;
	int r;
	(void)k;

	if (!found(env, M_CLASS, M_ALL))
		return NULL; /* the exception pending */
	r = hp_status(conn, &st);
	if (r < 0) {
		throw_hp(env, r, false, "reading the status", hp_last_error(conn));
		return NULL;
	}
	classes = (*env)->NewObjectArray(env, (jsize)st->nclasses, methods[M_CLASS].k, NULL);
	journals = classes ? (*env)->NewObjectArray(env, (jsize)st->njournals, methods[M_JOURNAL].k, NULL) : NULL;
	if (!journals)
		goto out; /* OutOfMemoryError pending */
	for (uint32_t i = 0; i < st->nclasses; i++) {
		const struct hp_class_status *cs = st->classes[i];
		jobject cs_obj;

		STATUS_RECORD(M_CLASS, STATUS_CLASS_ARGS, cs);
		if (!cs_obj)
			goto out;
		(*env)->SetObjectArrayElement(env, classes, (jsize)i, cs_obj);
		(*env)->DeleteLocalRef(env, cs_obj);
	}
	for (uint32_t i = 0; i < st->njournals; i++) {
		const struct hp_journal_status *js = st->journals[i];
		jobject js_obj;

		STATUS_RECORD(M_JOURNAL, STATUS_JOURNAL_ARGS, js);
		if (!js_obj)
			goto out;
		(*env)->SetObjectArrayElement(env, journals, (jsize)i, js_obj);
		(*env)->DeleteLocalRef(env, js_obj);
	}
	{
		jvalue a[] = { STATUS_ARGS(ARG, st, classes, journals) };

		if (!(*env)->ExceptionCheck(env))
			status = (*env)->CallStaticObjectMethodA(env, methods[M_STATUS].k, methods[M_STATUS].m, a);
	}
out:
	hp_status_free(st);
	return status;
}

/* ---- journal writers ---- */

/* Connect and open a writer on the new connection; throws on failure. */
JNIEXPORT jlong JNICALL Java_org_hugepool_Native_writerOpen(JNIEnv *env, jclass k, jstring socket, jstring journal)
{
	struct writer *w = NULL;
	char *path, *name;
	int r;
	(void)k;

	path = name = NULL;
	if (!utf(env, socket, &path) || !utf(env, journal, &name))
		goto fail; /* OutOfMemoryError pending */
	if (!name) {
		throw_new(env, "java/lang/NullPointerException", "a null journal name");
		goto fail;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		throw_hp(env, -ENOMEM, false, "opening a journal writer", "");
		goto fail;
	}
	r = hp_connect(path, &w->c);
	if (r < 0) {
		char what[160];

		/* the uid's connection limit counts it: say whose connection it is */
		snprintf(what, sizeof(what), "connecting to hugepoold for a writer of journal \"%.64s\" (its own connection)",
			 name);
		throw_hp(env, r, true, what, hp_last_error(NULL));
		goto fail;
	}
	r = hp_journal_open(w->c, name, &w->j);
	if (r < 0) {
		char what[PATH_MAX];

		snprintf(what, sizeof(what), "opening a writer of journal \"%s\"", name);
		throw_hp(env, r, false, what, hp_last_error(w->c));
		hp_disconnect(w->c);
		goto fail;
	}
	free(path);
	free(name);
	return (jlong)(uintptr_t)w;
fail:
	free(path);
	free(name);
	free(w);
	return 0;
}

JNIEXPORT void JNICALL Java_org_hugepool_Native_writerClose(JNIEnv *env, jclass k, jlong h)
{
	struct writer *w = (struct writer *)(uintptr_t)h;
	(void)env, (void)k;

	hp_journal_close(w->j);
	hp_disconnect(w->c);
	free(w->scratch);
	free(w);
}

JNIEXPORT jstring JNICALL Java_org_hugepool_Native_writerLastError(JNIEnv *env, jclass k, jlong h)
{
	(void)k;
	return text(env, hp_last_error(((struct writer *)(uintptr_t)h)->c));
}

/* Room for len bytes in the writer's copy area; NULL when memory is short. */
static char *scratch(struct writer *w, size_t len)
{
	if (len > w->cap) {
		size_t cap = len < 4096 ? 4096 : len;
		char *p = realloc(w->scratch, cap);

		if (!p)
			return NULL;
		w->scratch = p;
		w->cap = cap;
	}
	return w->scratch;
}

/*
 * One record, from a direct buffer (buf, array NULL) or an array: append and return its ticket,
 * or with wait, append, wait and return its LSN; -errno.
 */
static jlong append_one(JNIEnv *env, struct writer *w, jobject buf, jbyteArray array, jint off, jint len, bool wait)
{
	uint64_t v;
	char *p;
	int r;

	if (!buf) {
		if (!array_range(env, array, off, len))
			return -EINVAL;
		if (!(p = scratch(w, (size_t)len)))
			return -ENOMEM;
		(*env)->GetByteArrayRegion(env, array, off, len, (jbyte *)p);
	} else if (!(p = direct(env, buf, off, len))) {
		return -EINVAL;
	} else if (!in_place(env, buf)) {
		return NOT_IN_PLACE;
	}
	r = wait ? hp_journal_append_wait(w->j, p, (size_t)len, &v) : hp_journal_append(w->j, p, (size_t)len, &v);
	return r < 0 ? r : (jlong)v;
}

JNIEXPORT jlong JNICALL Java_org_hugepool_Native_append(JNIEnv *env, jclass k, jlong h, jobject buf, jint off,
							jint len, jboolean wait)
{
	(void)k;
	return append_one(env, (struct writer *)(uintptr_t)h, buf, NULL, off, len, wait);
}

JNIEXPORT jlong JNICALL Java_org_hugepool_Native_appendArray(JNIEnv *env, jclass k, jlong h, jbyteArray a,
							     jint off, jint len, jboolean wait)
{
	(void)k;
	return append_one(env, (struct writer *)(uintptr_t)h, NULL, a, off, len, wait);
}

/* Native.appendBatch's modes */
enum { BATCH_APPEND = 0, BATCH_WAIT = 1, BATCH_LAZY = 2 };

/*
 * n records as one group (consecutive LSNs, durable together): each recs[i] a byte[] or a direct
 * ByteBuffer, its bytes [offs[i], offs[i] + lens[i]). Arrays are copied into the writer's area
 * first, buffers appended in place. mode: BATCH_APPEND, BATCH_WAIT (append and wait) or
 * BATCH_LAZY (HP_JOURNAL_APPEND_LAZY). The ticket, or with BATCH_WAIT the first LSN; -errno.
 */
JNIEXPORT jlong JNICALL Java_org_hugepool_Native_appendBatch(JNIEnv *env, jclass k, jlong h, jobjectArray recs,
							     jintArray offs, jintArray lens, jint mode)
{
	struct writer *w = (struct writer *)(uintptr_t)h;
	jsize n = recs ? (*env)->GetArrayLength(env, recs) : 0;
	jint off[BATCH_MAX], len[BATCH_MAX];
	struct iovec iov[BATCH_MAX];
	size_t copy = 0, at = 0;
	uint64_t v;
	int r;
	(void)k;

	if (n <= 0 || n > BATCH_MAX || mode < BATCH_APPEND || mode > BATCH_LAZY)
		return -EINVAL;
	if (!offs || !lens || (*env)->GetArrayLength(env, offs) != n || (*env)->GetArrayLength(env, lens) != n) {
		throw_new(env, "java/lang/IllegalArgumentException", "a batch's records, offsets and lengths differ in number");
		return -EINVAL;
	}
	(*env)->GetIntArrayRegion(env, offs, 0, n, off);
	(*env)->GetIntArrayRegion(env, lens, 0, n, len);
	for (jsize i = 0; i < n; i++) {
		if (off[i] < 0 || len[i] < 0)
			return -EINVAL;
		copy += (size_t)len[i];
	}
	if (!scratch(w, copy))
		return -ENOMEM;
	for (jsize i = 0; i < n; i++) {
		jobject o = (*env)->GetObjectArrayElement(env, recs, i);

		if (!o)
			return -EINVAL;
		if ((*env)->IsInstanceOf(env, o, methods[M_BYTES].k)) {
			if ((jlong)off[i] + len[i] > (*env)->GetArrayLength(env, o))
				return -EINVAL;
			(*env)->GetByteArrayRegion(env, o, off[i], len[i], (jbyte *)w->scratch + at);
			iov[i] = (struct iovec){ w->scratch + at, (size_t)len[i] };
			at += (size_t)len[i];
		} else {
			char *p = direct(env, o, off[i], len[i]);

			if (!p)
				return -EINVAL;
			if (!in_place(env, o))
				return NOT_IN_PLACE; /* before anything was appended */
			iov[i] = (struct iovec){ p, (size_t)len[i] };
		}
		(*env)->DeleteLocalRef(env, o);
	}
	r = mode == BATCH_WAIT ? hp_journal_appendv_wait(w->j, iov, (unsigned)n, &v)
			       : hp_journal_appendv_flags(w->j, iov, (unsigned)n,
							  mode == BATCH_LAZY ? HP_JOURNAL_APPEND_LAZY : 0, &v);
	return r < 0 ? r : (jlong)v;
}

JNIEXPORT jint JNICALL Java_org_hugepool_Native_await(JNIEnv *env, jclass k, jlong h, jlong ticket, jlong timeout_ms)
{
	(void)env, (void)k;
	return hp_journal_wait(((struct writer *)(uintptr_t)h)->j, (uint64_t)ticket, timeout_ms);
}

JNIEXPORT jint JNICALL Java_org_hugepool_Native_awaitLsn(JNIEnv *env, jclass k, jlong h, jlong lsn, jlong timeout_ms)
{
	(void)env, (void)k;
	return hp_journal_wait_lsn(((struct writer *)(uintptr_t)h)->j, (uint64_t)lsn, timeout_ms);
}

JNIEXPORT jlong JNICALL Java_org_hugepool_Native_durableLsn(JNIEnv *env, jclass k, jlong h)
{
	(void)env, (void)k;
	return (jlong)hp_journal_durable_lsn(((struct writer *)(uintptr_t)h)->j);
}

_Static_assert(HP_JOURNAL_WAIT_SPIN == 0 && HP_JOURNAL_WAIT_SLEEP == 1, "JournalWriter.WaitMode's ordinals");

JNIEXPORT jint JNICALL Java_org_hugepool_Native_setWaitMode(JNIEnv *env, jclass k, jlong h, jint mode)
{
	(void)env, (void)k;
	return hp_journal_set_wait_mode(((struct writer *)(uintptr_t)h)->j, mode);
}

JNIEXPORT jint JNICALL Java_org_hugepool_Native_truncate(JNIEnv *env, jclass k, jlong c, jstring journal, jlong lsn)
{
	char *name;
	int r;
	(void)k;

	if (!utf(env, journal, &name))
		return -ENOMEM;
	r = hp_journal_truncate((hp_conn *)(uintptr_t)c, name, (uint64_t)lsn);
	free(name);
	return r;
}

/* ---- journal readers ---- */

JNIEXPORT jlong JNICALL Java_org_hugepool_Native_readerOpen(JNIEnv *env, jclass k, jlong c, jstring journal,
							    jlong from)
{
	struct reader *rd;
	char *name;
	int r;
	(void)k;

	if (!utf(env, journal, &name))
		return -ENOMEM;
	rd = calloc(1, sizeof(*rd));
	if (!rd) {
		free(name);
		return -ENOMEM;
	}
	r = hp_journal_reader_open((hp_conn *)(uintptr_t)c, name, (uint64_t)from, &rd->r);
	free(name);
	if (r < 0) {
		free(rd);
		return r;
	}
	return (jlong)(uintptr_t)rd;
}

/*
 * Copy the next records into dst (a direct buffer of cap bytes), as many whole ones as fit, at
 * most max: meta gets lsn, offset, length of each; returns how many (0: none durable yet) or
 * -errno. A first record larger than cap: -EOVERFLOW with its length in meta[0] (grow, call
 * again: the record waits here).
 */
JNIEXPORT jint JNICALL Java_org_hugepool_Native_readerNext(JNIEnv *env, jclass k, jlong h, jobject dst, jint cap,
							   jlongArray meta, jint max)
{
	struct reader *rd = (struct reader *)(uintptr_t)h;
	char *p = direct(env, dst, 0, cap);
	jlong m[3 * READ_MAX];
	size_t at = 0;
	jint n = 0;
	(void)k;

	if (!p)
		return -EINVAL;
	if (max > READ_MAX)
		max = READ_MAX;
	if (max < 1 || !meta || (*env)->GetArrayLength(env, meta) < 3 * max) {
		throw_new(env, "java/lang/IllegalArgumentException", "readerNext's meta array is not 3 longs a record");
		return -EINVAL;
	}
	if (rd->err && !rd->pending) {
		int e = rd->err;

		rd->err = 0;
		return e;
	}
	while (n < max) {
		if (!rd->pending) {
			int r = hp_journal_reader_next(rd->r, &rd->lsn, &rd->data, &rd->len);

			if (r < 0 && n == 0)
				return r;
			if (r < 0)
				rd->err = r;
			if (r <= 0)
				break;
			rd->pending = true;
		}
		if (rd->len > (size_t)cap - at) {
			if (n == 0) {
				jlong need = (jlong)rd->len;

				(*env)->SetLongArrayRegion(env, meta, 0, 1, &need);
				return -EOVERFLOW;
			}
			break;
		}
		memcpy(p + at, rd->data, rd->len);
		m[3 * n] = (jlong)rd->lsn;
		m[3 * n + 1] = (jlong)at;
		m[3 * n + 2] = (jlong)rd->len;
		at += rd->len;
		n++;
		rd->pending = false;
	}
	if (n > 0)
		(*env)->SetLongArrayRegion(env, meta, 0, 3 * n, m);
	return n;
}

JNIEXPORT void JNICALL Java_org_hugepool_Native_readerClose(JNIEnv *env, jclass k, jlong h)
{
	struct reader *rd = (struct reader *)(uintptr_t)h;
	(void)env, (void)k;

	hp_journal_reader_close(rd->r);
	free(rd);
}

/* ---- spill streams ---- */

/* threshold: 0 the daemon's, -1 a file from the first byte, else bytes. */
JNIEXPORT jlong JNICALL Java_org_hugepool_Native_spillOpen(JNIEnv *env, jclass k, jlong c, jlong threshold)
{
	struct hp_spill_opts o = { .threshold = threshold < 0 ? HP_SPILL_ALWAYS_FILE : (uint64_t)threshold };
	struct spill *s = malloc(sizeof(*s));
	int r;
	(void)env, (void)k;

	if (!s)
		return -ENOMEM;
	r = hp_spill_open((hp_conn *)(uintptr_t)c, &o, &s->s);
	if (r < 0) {
		free(s);
		return r;
	}
	return (jlong)(uintptr_t)s;
}

JNIEXPORT jint JNICALL Java_org_hugepool_Native_spillWrite(JNIEnv *env, jclass k, jlong h, jobject buf, jint off,
							   jint len)
{
	char *p = direct(env, buf, off, len);
	(void)k;

	if (!p)
		return -EINVAL;
	if (!in_place(env, buf))
		return NOT_IN_PLACE;
	return hp_spill_write(((struct spill *)(uintptr_t)h)->s, p, (size_t)len);
}

JNIEXPORT jint JNICALL Java_org_hugepool_Native_spillWriteArray(JNIEnv *env, jclass k, jlong h, jbyteArray a,
								jint off, jint len)
{
	struct spill *s = (struct spill *)(uintptr_t)h;
	(void)k;

	if (!array_range(env, a, off, len))
		return -EINVAL;
	do {
		jint n = len < (jint)SPILL_SCRATCH ? len : (jint)SPILL_SCRATCH;
		int r;

		(*env)->GetByteArrayRegion(env, a, off, n, (jbyte *)s->scratch);
		if ((r = hp_spill_write(s->s, s->scratch, (size_t)n)) < 0)
			return r;
		off += n;
		len -= n;
	} while (len > 0);
	return 0;
}

JNIEXPORT jint JNICALL Java_org_hugepool_Native_spillFinish(JNIEnv *env, jclass k, jlong h)
{
	(void)env, (void)k;
	return hp_spill_finish(((struct spill *)(uintptr_t)h)->s);
}

/* Read up to len bytes into dst at off (a direct buffer): how many, 0 at the end, or -errno. */
JNIEXPORT jint JNICALL Java_org_hugepool_Native_spillRead(JNIEnv *env, jclass k, jlong h, jobject dst, jint off,
							  jint len)
{
	char *p = direct(env, dst, off, len);
	(void)k;

	return p ? (jint)hp_spill_read(((struct spill *)(uintptr_t)h)->s, p, (size_t)len) : -EINVAL;
}

JNIEXPORT jint JNICALL Java_org_hugepool_Native_spillRewind(JNIEnv *env, jclass k, jlong h)
{
	(void)env, (void)k;
	return hp_spill_rewind(((struct spill *)(uintptr_t)h)->s);
}

JNIEXPORT jint JNICALL Java_org_hugepool_Native_spillState(JNIEnv *env, jclass k, jlong h)
{
	(void)env, (void)k;
	return hp_spill_state(((struct spill *)(uintptr_t)h)->s);
}

JNIEXPORT jlong JNICALL Java_org_hugepool_Native_spillSize(JNIEnv *env, jclass k, jlong h)
{
	(void)env, (void)k;
	return (jlong)hp_spill_size(((struct spill *)(uintptr_t)h)->s);
}

JNIEXPORT void JNICALL Java_org_hugepool_Native_spillClose(JNIEnv *env, jclass k, jlong h)
{
	struct spill *s = (struct spill *)(uintptr_t)h;
	(void)env, (void)k;

	hp_spill_close(s->s);
	free(s);
}
