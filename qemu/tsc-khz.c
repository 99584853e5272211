// SPDX-License-Identifier: GPL-2.0
//
// Prints this machine's TSC rate in kHz, measured against CLOCK_MONOTONIC_RAW.
//
// Under TCG, QEMU's guest reads the host's TSC (rdtsc is emulated with the host's counter), so
// this is the rate the guest kernel must be told with tsc_early_khz=: it cannot calibrate the
// TSC itself, since its PIT calibration fails under emulation and a guest without ACPI has no
// HPET or PM timer to calibrate against (qemu/boot.sh).
//
// Each of five measurements spans 200 ms; the clock is read just before and just after each TSC
// read, so a preemption between them shows as a wide bracket and the read is retried. The
// median of the five is printed. Exits 1 on a machine whose TSC does not run at a constant rate.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

enum { TRIES = 5, SPAN_NS = 200 * 1000 * 1000, TIGHT_NS = 2000, ATTEMPTS = 1000 };

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// One TSC reading and the clock's time at it; 0 if no bracket was tight within ATTEMPTS.
static int sample(uint64_t *tsc, int64_t *ns)
{
	for (int i = 0; i < ATTEMPTS; i++) {
		int64_t before = now_ns();
		uint64_t counter = __rdtsc();
		int64_t after = now_ns();

		if (after - before <= TIGHT_NS) {
			*tsc = counter;
			*ns = before + (after - before) / 2;
			return 1;
		}
	}
	return 0;
}

static int constant_tsc(void)
{
	FILE *cpuinfo = fopen("/proc/cpuinfo", "r");
	char line[8192];
	int found = 0;

	if (!cpuinfo)
		return 0;
	while (!found && fgets(line, sizeof(line), cpuinfo))
		found = strncmp(line, "flags", 5) == 0 && strstr(line, " constant_tsc") &&
			strstr(line, " nonstop_tsc");
	fclose(cpuinfo);
	return found;
}

static int by_value(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

int main(void)
{
	uint64_t khz[TRIES];

	if (!constant_tsc()) {
		fprintf(stderr, "tsc-khz: this CPU's TSC does not run at a constant rate\n");
		return 1;
	}
	for (int i = 0; i < TRIES; i++) {
		uint64_t tsc0, tsc1;
		int64_t ns0, ns1;
		struct timespec span = { 0, SPAN_NS };

		if (!sample(&tsc0, &ns0))
			return 1;
		nanosleep(&span, NULL);
		if (!sample(&tsc1, &ns1) || ns1 <= ns0)
			return 1;
		khz[i] = (tsc1 - tsc0) * 1000000 / (uint64_t)(ns1 - ns0);
	}
	qsort(khz, TRIES, sizeof(khz[0]), by_value);
	printf("%llu\n", (unsigned long long)khz[TRIES / 2]);
	return 0;
}
