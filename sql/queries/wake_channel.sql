SELECT {schema}.wake_channel()
