/* The core's own configuration keys (sections log, plugin, sandbox, state,
 * server); etc/sandgate.ini.example documents each. */
#ifndef SG_CORE_KEYS_H
#define SG_CORE_KEYS_H

/* Registers the core's sections with the config store. */
void sg_core_keys_register(void);

#endif
