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
    inherit (good) failed configs groups tmpfiles services paths groupNames;
    # what environment.etc gets must be the JSON of the same config
    etcMatches = builtins.all (n: builtins.fromJSON good.etc."tentaflake/workers/${n}.json".text
      == good.configs.${n}) (builtins.attrNames cases.good);
    assertionCount = builtins.length good.assertions;
  };
  bad = builtins.mapAttrs (_: c: {
    inherit (c) expect parserRejects;
    inherit (run c.agents) failed configs;
  }) cases.bad;
}
