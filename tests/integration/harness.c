/* SPDX-License-Identifier: MIT */
/*
 * harness.c - see harness.h. Used by the integration tests only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

double harness_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");

	if (!f)
		return -errno;
	fputs(text, f);
	return fclose(f) == 0 ? 0 : -errno;
}

int harness_start(struct daemon *d, const char *globals, const char *classes)
{
	const char *build = getenv("HP_BUILD") ? getenv("HP_BUILD") : "build";
	const char *huge = getenv("HP_TEST_HUGEPAGES") ? getenv("HP_TEST_HUGEPAGES") : "prefer";
	char conf[8192], notify_path[96], bin[256], buf[4096];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int nfd;
	double deadline;

	memset(d, 0, sizeof(*d));
	snprintf(d->dir, sizeof(d->dir), "/tmp/hugepool-test.XXXXXX");
	if (!mkdtemp(d->dir))
		return -errno;
	/* other uids (the cross-uid tests) must reach the socket */
	chmod(d->dir, 0755);
	snprintf(d->socket, sizeof(d->socket), "%s/sock", d->dir);
	snprintf(d->conf, sizeof(d->conf), "%s/hugepoold.conf", d->dir);
	snprintf(d->log, sizeof(d->log), "%s/daemon.log", d->dir);
	snprintf(notify_path, sizeof(notify_path), "%s/notify", d->dir);
	/* a test that sets hugepages itself overrides $HP_TEST_HUGEPAGES */
	if (globals && strstr(globals, "hugepages ="))
		snprintf(conf, sizeof(conf), "socket = %s\nsocket_mode = 0666\n%s\n%s\n", d->socket, globals, classes);
	else
		snprintf(conf, sizeof(conf), "socket = %s\nsocket_mode = 0666\nhugepages = %s\n%s\n%s\n", d->socket,
			 huge, globals ? globals : "", classes);
	if (write_file(d->conf, conf) < 0)
		return -EIO;

	nfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", notify_path);
	if (nfd < 0 || bind(nfd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	snprintf(bin, sizeof(bin), "%s/hugepoold", build);
	d->pid = fork();
	if (d->pid < 0)
		return -errno;
	if (d->pid == 0) {
		int fd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

		if (fd >= 0) {
			dup2(fd, STDERR_FILENO);
			dup2(fd, STDOUT_FILENO);
		}
		/* never outlive the test, even when it crashes */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		setenv("NOTIFY_SOCKET", notify_path, 1);
		execl(bin, "hugepoold", "-v", "-c", d->conf, (char *)NULL);
		_exit(127);
	}
	/* wait for READY=1, or for the daemon to die */
	deadline = harness_ms() + 60000;
	for (;;) {
		struct pollfd pfd = { .fd = nfd, .events = POLLIN };
		int status;
		ssize_t n;

		if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
			close(nfd);
			d->exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
			d->pid = 0;
			return -ECHILD;
		}
		if (harness_ms() > deadline) {
			close(nfd);
			return -ETIMEDOUT;
		}
		/* short waits only so that a daemon dying before READY is noticed */
		if (poll(&pfd, 1, 100) <= 0)
			continue;
		n = recv(nfd, buf, sizeof(buf) - 1, 0);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		if (strstr(buf, "READY=1"))
			break;
	}
	close(nfd);
	return 0;
}

void harness_dump_log(const struct daemon *d)
{
	char line[1024];
	FILE *f = fopen(d->log, "re");

	if (!f)
		return;
	fprintf(stderr, "--- daemon log %s ---\n", d->log);
	while (fgets(line, sizeof(line), f))
		fputs(line, stderr);
	fclose(f);
}

int harness_log_count(const struct daemon *d, const char *s)
{
	char line[1024];
	int n = 0;
	FILE *f = fopen(d->log, "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, s) != NULL;
	fclose(f);
	return n;
}

int harness_stop(struct daemon *d)
{
	int status = 0, ret;

	if (d->pid <= 0)
		return -1;
	kill(d->pid, SIGTERM);
	waitpid(d->pid, &status, 0);
	d->pid = 0;
	ret = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	if (ret != 0 || getenv("HP_TEST_KEEP")) {
		harness_dump_log(d);
		return ret;
	}
	harness_cleanup(d);
	return ret;
}

void harness_cleanup(struct daemon *d)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", d->dir);
}
