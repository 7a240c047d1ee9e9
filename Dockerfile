# Builds cairn and its plugins on Debian 12 and ships them in a slim image.
FROM debian:12 AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN bash scripts/install-deps.sh
COPY . .
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF \
 && cmake --build build --parallel \
 && install -D build/daemon/cairn /out/usr/bin/cairn \
 && install -d /out/usr/lib/cairn/plugins /out/etc/cairn/workflows \
 && install -m 0644 build/plugins/example.so build/plugins/noop.so /out/usr/lib/cairn/plugins/ \
 && install -m 0644 config/cairn.yaml /out/etc/cairn/cairn.yaml \
 && install -m 0644 config/workflows/*.yaml /out/etc/cairn/workflows/

FROM debian:12-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends libpqxx-6.4 libyaml-cpp0.7 libspdlog1.10 \
      libfmt9 libboost-program-options1.74.0 libsystemd0 libssl3 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --home /var/lib/cairn cairn
COPY --from=build /out/ /
USER cairn
ENTRYPOINT ["/usr/bin/cairn"]
CMD ["run", "--config", "/etc/cairn/cairn.yaml"]
