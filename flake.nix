{
  description = "tentaflake-worker: an AI agent's untrusted commands in disposable gVisor capsules";

  # Only the package and the checks use nixpkgs; nixosModules.default needs no input (the
  # module builds the package with the system's own pkgs).
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-24.11";

  outputs = { self, nixpkgs }:
    let
      systems = [ "x86_64-linux" "aarch64-linux" ];
      forAllSystems = f: builtins.listToAttrs
        (map (system: { name = system; value = f system; }) systems);
    in {
      nixosModules.default = import ./nixos/module.nix;

      packages = forAllSystems (system: {
        default = nixpkgs.legacyPackages.${system}.callPackage ./nixos/package.nix { };
      });

      checks = forAllSystems (system:
        let
          pkgs = nixpkgs.legacyPackages.${system};
          # The module's builtins-only logic on the test cases of make check
          # (tests/data/nix/cases.nix): every good agent passes, every bad one fails with
          # exactly its own message.
          r = import ./tests/data/nix/run.nix;
          badOk = builtins.all (c: builtins.length c.failed == 1
            && builtins.match ".*${builtins.replaceStrings [ "(" ")" "." "[" "]" "$" "^" "{" "}" "+" "*" "?" "|" ]
                [ "\\(" "\\)" "\\." "\\[" "\\]" "\\$" "\\^" "\\{" "\\}" "\\+" "\\*" "\\?" "\\|" ] c.expect}.*"
                (builtins.head c.failed) != null) (builtins.attrValues r.bad);
        in {
          package = self.packages.${system}.default;
          module-logic =
            if r.good.failed == [ ] && r.good.etcMatches && badOk
            then pkgs.runCommand "tentaflake-module-logic" { } "touch $out"
            else throw "tentaflake module logic: a test case of tests/data/nix/cases.nix fails";
        });
    };
}
