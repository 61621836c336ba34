# Evaluates tests/data/nix/serve-cases.nix with nixos/serve-logic.nix, for
# tests/unit/test-nix-serve.sh: nix-instantiate --eval --strict --json tests/data/nix/serve-run.nix
let
  logic = import ../../../nixos/serve-logic.nix;
  cases = import ./serve-cases.nix;
  complete = workers: builtins.mapAttrs (name: w: logic.withDefaults name w) workers;
  run = workers: logic.evaluate { workers = complete workers; runcPath = [ "/nix/store/22222222222222222222222222222222-runc" ]; };
  good = run cases.good;
in {
  good = {
    inherit (good) failed flags conf services;
    etc = builtins.mapAttrs (_: v: v.source or "text") good.etc;
    assertionCount = builtins.length good.assertions;
  };
  bad = builtins.mapAttrs (_: c: { inherit (c) expect; inherit (run c.workers) failed; }) cases.bad;
  fold = map logic.foldLabel [ "ci.1" "CI-1" "service:ci-1" ];
  address = map logic.addressOf [ "https://forge.example" "http://forge:8080/x" "http://[::1]:81" "http://h" ];
}
