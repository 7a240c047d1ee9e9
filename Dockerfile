# cairn in a container: builds the Debian package (the same cairn_*.deb as
# `cpack -G DEB`) on Debian 12 and installs it into a slim Debian 12, so the
# image has the package's files, account and runtime dependencies.
#
#   docker build -t cairn .
#   docker run -e CAIRN_DATABASE_URL=postgresql://... \
#     -v /srv/cairn/workflows:/etc/cairn/workflows:ro cairn
#
# The configuration is /etc/cairn/cairn.yaml (mount your own over it); the
# environment overrides any key of it (CAIRN_<KEY PATH>, e.g.
# CAIRN_DATABASE_URL, CAIRN_WORKER_CONCURRENCY; `cairn config show` lists
# them). Plugins of your own go into /usr/lib/cairn/plugins, owned by root.
FROM debian:12 AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN bash scripts/install-deps.sh
COPY . .
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF \
 && cmake --build build --parallel \
 && cpack --config build/CPackConfig.cmake -G DEB -B /out

FROM debian:12-slim
COPY --from=build /out/cairn_*.deb /tmp/
# apt resolves the package's Depends; its postinst creates the cairn account.
RUN apt-get update \
 && apt-get install -y --no-install-recommends /tmp/cairn_*.deb ca-certificates \
 && rm -rf /var/lib/apt/lists/* /tmp/cairn_*.deb
# Metrics, /healthz and /readyz on every interface of the container, from
# one server (both on the same address).
ENV CAIRN_METRICS_LISTEN=0.0.0.0:9464 CAIRN_HEALTH_LISTEN=0.0.0.0:9464
EXPOSE 9464
# Healthy while the daemon says it is ready (/readyz answers 200). The image
# has no HTTP client; bash's /dev/tcp speaks to the health listener.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD bash -c 'listen=${CAIRN_HEALTH_LISTEN:-127.0.0.1:9464}; host=${listen%:*}; \
    port=${listen##*:}; case $host in ""|0.0.0.0) host=127.0.0.1 ;; "[::]") host=::1 ;; esac; \
    host=${host#[}; host=${host%]}; exec 3<>"/dev/tcp/$host/$port" || exit 1; \
    printf "GET /readyz HTTP/1.0\r\nHost: cairn\r\n\r\n" >&3; IFS= read -r -t 4 status <&3; \
    [[ $status == "HTTP/1."?" 200 "* ]]'
USER cairn
ENTRYPOINT ["/usr/bin/cairn"]
CMD ["run", "--config", "/etc/cairn/cairn.yaml"]
