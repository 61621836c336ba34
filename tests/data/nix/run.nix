# Evaluates tests/data/nix/cases.nix with the builtins-only logic (nixos/logic.nix), for
# tests/unit/test-nix.sh: nix-instantiate --eval --strict --json tests/data/nix/run.nix
let
  logic = import ../../../nixos/logic.nix;
  cases = import ./cases.nix;
  # What the module does before calling the logic: fill in defaults, pass the package.
  complete = agents: builtins.mapAttrs
    (name: a: logic.withDefaults name ({ inherit (cases) package; } // a)) agents;
  run = agents: logic.evaluate { agents = complete agents; inherit (cases) groups; };
  good = run cases.good;
in {
  good = {
    inherit (good) failed configs groups tmpfiles services paths timers groupNames closureMerges;
    # what environment.etc gets (or, with a toolchain, the base the merge starts from) must be
    # the JSON of the same config
    etcMatches = builtins.all (n:
      let f = "tentaflake/workers/${n}.json"; in
      builtins.fromJSON (if good.etc ? ${f} then good.etc.${f}.text else good.closureMerges.${n}.base)
        == good.configs.${n}) (builtins.attrNames cases.good);
    etcNames = builtins.attrNames good.etc;
    assertionCount = builtins.length good.assertions;
  };
  inherit (logic) closureMergeScript maxSystemMounts wakeFile maxCachePaths maxCachePathBytes cacheDefaults
    networkDefaults maxNetworkAllow networkServiceConfig runcServiceConfig egressIdFirst egressIdLast;
  inherit (cases) toolchainEnv;
  # the image loader's text for a docker agent, run by the test against a fake engine
  imageLoad = logic.imageLoadScript { engine = "@ENGINE@"; image = "@IMAGE@"; reference = "@REF@"; };
  bad = builtins.mapAttrs (_: c: {
    inherit (c) expect parserRejects;
    inherit (run c.agents) failed configs;
  }) cases.bad;
}
