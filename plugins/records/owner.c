/* The owner tag of a process (plugins/records/owner.h). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugins/records/owner.h"

/* Field 22 of /proc/PID/stat.  Returns 0, or -1 when there is no such
 * process (or no /proc). */
static int start_time(long pid, unsigned long long *start)
{
	char path[64], buf[1024], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* the name may hold spaces */
	if (!p)
		return -1;
	/* p is at the end of field 2. */
	for (int field = 2; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	if (!p)
		return -1;
	*start = strtoull(p + 1, NULL, 10);
	return 0;
}

void mrec_owner_self(char *out, size_t size)
{
	char host[256] = "localhost";
	unsigned long long start = 0;

	gethostname(host, sizeof(host) - 1);
	start_time((long)getpid(), &start);
	snprintf(out, size, "%s:%ld:%llu", host, (long)getpid(), start);
}

bool mrec_owner_alive(const char *mine, const char *tag)
{
	char host[256] = "";
	long pid = 0;
	unsigned long long start = 0, now = 0;

	if (!tag || sscanf(tag, "%255[^:]:%ld:%llu", host, &pid, &start) != 3 || pid <= 0)
		return false;
	if (strlen(host) != strcspn(mine, ":") || strncmp(host, mine, strlen(host)))
		return true;
	return start_time(pid, &now) == 0 && now == start;
}
