# Serve workers for nixos/serve-logic.nix, evaluated by tests/unit/test-nix-serve.sh (builtins
# only). good: every assertion holds; its flags must be accepted by the real serve.
# bad.<case>: { workers; expect; }: exactly one assertion fails, with a message containing
# `expect`.
let
  h64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  ci = {
    server = "https://forge.example.org";
    keyFile = "/run/secrets/ci-1.key";
    tokenFile = "/run/secrets/ci-1.token";
    systemMountsIdentity = "nixos-24.05";
    mounts = [ { host = "/nix/store"; identity = "nixpkgs-24.05"; }
               { host = "/opt/rust"; sandbox = "/usr/local/rust"; identity = "rust-1.89.0"; } ];
  };
  good = {
    ci-1 = ci // { concurrency = 2; maxMemoryMb = 4096; defaultMemoryMb = 1024;
                   # a policy with network gets these, through the worker's egress proxy
                   allowHosts = [ "registry.npmjs.org:443" "*.pythonhosted.org:443" ]; };
    docker = {
      label = "service:ci-docker";
      server = "http://forge.internal:8080/";
      keyFile = "/etc/tentaflake/keys/docker.key";
      tokenFile = "/etc/tentaflake/keys/docker.token";
      sandbox = "docker";
      image = "ghcr.io/acme/ci@sha256:${h64}";
      engineRuntime = "runsc";
    };
    # the runc engine: the host's kernel behind its walls, its mounts as runsc's
    runc = ci // { label = "ci-runc"; sandbox = "runc"; };
  };
  one = extra: { workers = { w = ci // extra; }; };
in {
  inherit good;
  bad = {
    key-in-store = one { keyFile = "/nix/store/00000000000000000000000000000000-ci.key"; mounts = [ ]; } // {
      expect = "tentaflake.worker.serve.w.keyFile '/nix/store/00000000000000000000000000000000-ci.key' is inside the Nix store"; };
    token-in-store = one { tokenFile = "/nix/store/00000000000000000000000000000000-token"; mounts = [ ]; } // {
      expect = "tentaflake.worker.serve.w.tokenFile '/nix/store/00000000000000000000000000000000-token' is inside the Nix store"; };
    key-missing = one { keyFile = null; } // {
      expect = "tentaflake.worker.serve.w.keyFile must be an absolute, normalised path, got nothing"; };
    token-relative = one { tokenFile = "secrets/token"; } // {
      expect = "tentaflake.worker.serve.w.tokenFile must be an absolute, normalised path, got 'secrets/token'"; };
    image-tag = one { sandbox = "podman"; mounts = [ ]; systemMountsIdentity = null; image = "ghcr.io/acme/ci:latest"; } // {
      expect = "tentaflake.worker.serve.w.image 'ghcr.io/acme/ci:latest' is not pinned"; };
    image-missing = one { sandbox = "docker"; mounts = [ ]; systemMountsIdentity = null; } // {
      expect = "tentaflake.worker.serve.w.image is required with the docker sandbox"; };
    image-with-runc = one { sandbox = "runc"; image = "sha256:${h64}"; } // {
      expect = "tentaflake.worker.serve.w.image is only for the docker and podman sandboxes"; };
    platform-with-runc = one { sandbox = "runc"; platform = "systrap"; } // {
      expect = "tentaflake.worker.serve.w.platform is gVisor's: for the runsc sandbox only"; };
    image-with-runsc = one { image = "sha256:${h64}"; } // {
      expect = "tentaflake.worker.serve.w.image is only for the docker and podman sandboxes"; };
    mounts-with-engine = one { sandbox = "docker"; image = "sha256:${h64}"; systemMountsIdentity = null; } // {
      expect = "tentaflake.worker.serve.w.mounts and tentaflake.worker.serve.w.systemMountsIdentity are for the runsc and runc sandboxes"; };
    default-memory-above-ceiling = one { defaultMemoryMb = 9000; } // {
      expect = "tentaflake.worker.serve.w.defaultMemoryMb (9000) is above its ceiling tentaflake.worker.serve.w.maxMemoryMb (8192)"; };
    default-timeout-above-ceiling = one { maxTimeoutSecs = 300; } // {
      expect = "tentaflake.worker.serve.w.defaultTimeoutSecs (600) is above its ceiling tentaflake.worker.serve.w.maxTimeoutSecs (300)"; };
    default-pids-above-ceiling = one { maxPids = 100; } // {
      expect = "tentaflake.worker.serve.w.defaultPids (512) is above its ceiling tentaflake.worker.serve.w.maxPids (100)"; };
    default-cpu-above-ceiling = one { defaultCpuSecs = 4000; } // {
      expect = "tentaflake.worker.serve.w.defaultCpuSecs (4000) is above its ceiling tentaflake.worker.serve.w.maxCpuSecs (3600)"; };
    timeout-above-a-week = one { maxTimeoutSecs = 604801; } // {
      expect = "tentaflake.worker.serve.w.maxTimeoutSecs (604801) is above the worker's maximum"; };
    mount-without-identity = one { mounts = [ { host = "/opt/tools"; identity = ""; } ]; } // {
      expect = "every mount needs an identity naming its content (e.g. rust-1.89.0, no '=', ':' or space): the environment digest records it; without one: '/opt/tools'"; };
    mount-not-normalised = one { mounts = [ { host = "/opt/tools/"; identity = "tools-1"; } ]; } // {
      expect = "tentaflake.worker.serve.w.mounts: host and sandbox paths must be absolute and normalised: '/opt/tools/'"; };
    mount-over-token = one { mounts = [ { host = "/run/secrets"; identity = "secrets"; } ]; } // {
      expect = "tentaflake.worker.serve.w.mounts: '/run/secrets' contains the keyFile or the tokenFile"; };
    server-not-http = one { server = "ftp://forge.example.org"; } // {
      expect = "tentaflake.worker.serve.w.server must be an http:// or https:// URL, got 'ftp://forge.example.org'"; };
    label-with-space = one { label = "ci 1"; } // {
      expect = "tentaflake.worker.serve.w.label 'ci 1' is not a label the unit can carry"; };
    flag-with-space = one { extraFlags = [ "--runsc" "/opt/my runsc" ]; } // {
      expect = "these flag values cannot be passed through the unit (no space, quote, backslash, '$' or backquote): '/opt/my runsc'"; };
    allow-hosts-with-engine = one { sandbox = "docker"; image = "sha256:${h64}"; mounts = [ ]; systemMountsIdentity = null;
                                    allowHosts = [ "pypi.org:443" ]; } // {
      expect = "tentaflake.worker.serve.w.allowHosts is for the runsc and runc sandboxes"; };
    allow-host-without-port = one { allowHosts = [ "pypi.org" ]; } // {
      expect = "tentaflake.worker.serve.w.allowHosts: 'pypi.org' has no port"; };
    allow-hosts-too-many = one { allowHosts = builtins.genList (i: "h${toString i}.example.org:443") 65; } // {
      expect = "tentaflake.worker.serve.w.allowHosts: must name 1..64 host:port entries, got 65"; };
    labels-fold-alike = { workers = { a = ci // { label = "ci.1"; }; b = ci // { label = "CI-1"; }; };
      expect = "tentaflake.worker.serve: the labels 'ci.1' ('a') and 'CI-1' ('b') fold to the same worker name 'serve-ci-1'"; };
  };
}
