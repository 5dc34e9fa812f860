#include "config.h"

#include "core/log.h"
#include "transports/transport.h"

int sg_http_run(void)
{
	SG_ERROR("the http transport is not built yet");
	return 1;
}
