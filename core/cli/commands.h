/* The commands behind core/cli/cli.c's dispatch.  Each takes the arguments
 * after its name, the global --config (NULL when not given) and the global
 * --json, and returns the process exit status (SG_CLI_*). */
#ifndef SG_CORE_CLI_COMMANDS_H
#define SG_CORE_CLI_COMMANDS_H

#include <stdbool.h>

int sg_cmd_install(int argc, char **argv, const char *config, bool json);
int sg_cmd_uninstall(int argc, char **argv, const char *config, bool json);
int sg_cmd_status(int argc, char **argv, const char *config, bool json);
int sg_cmd_deploy(int argc, char **argv, const char *config, bool json);

#endif
