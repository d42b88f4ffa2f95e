/* cmd_recover.c - `onigpu recover DIR`: make an Open Ephys recording that
 * `read --record` or `run --record` left when its process died (kill -9, a
 * crash, the power) consistent, so that every reader takes it whole up to
 * its last flush (src/record/record.h: rec_recover). */
#include <stdio.h>
#include <string.h>
#include "cli.h"
#include "record/record.h"

static int recover_run(int argc, char **argv);
CLI_COMMAND(recover, "recover", "DIR",
            "make a recording left by a process that died consistent (Open Ephys format; docs/recording.md)", NULL,
            recover_run)

static int recover_run(int argc, char **argv)
{
    const struct cli_command *cmd = &cli_cmd_recover;
    if (argc != 2 || argv[1][0] == '-')
        return argc == 2 ? cli_bad_arg(cmd, argv[1]) : cli_usage(cmd);
    char report[16384];
    int rc = rec_recover(argv[1], report, sizeof report);
    fputs(report, rc ? stderr : stdout);
    if (rc) {
        fprintf(stderr, "onigpu recover: %s: %s\n", argv[1], oni_error_str(rc));
        return 1;
    }
    printf("%s\n", strstr(report, "(made consistent)") ? "recovered: every folder now holds whole rows only"
                                                       : "nothing to do: the recording was consistent");
    return 0;
}
