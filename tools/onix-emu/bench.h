/* bench.h - `onix-emu bench` (bench.c): the emulated card benchmarked
 * through its own interface, below the hardware boundary. */
#ifndef ONIX_EMU_BENCH_H
#define ONIX_EMU_BENCH_H

/* Run `onix-emu bench` with its arguments (argv[0] = "bench"); returns the
 * process exit status: 0, 1 (a measurement or the results failed), 2 (usage). */
int emu_bench_main(int argc, char **argv);

#endif
