# tentaflake-capsule-init, the capsule's static pid 1, built with pkgsStatic (musl):
#   pkgsStatic.callPackage ./capsule-init.nix { src = ...; version = ...; }
# It links only common/ (fd-util) and libarchive, so only common/ goes into the library here.
{ stdenv, pkg-config, libarchive, jansson, openssl, libsodium, src, version }:
stdenv.mkDerivation {
  pname = "tentaflake-capsule-init";
  inherit version src;

  nativeBuildInputs = [ pkg-config ];
  buildInputs = [ libarchive jansson openssl libsodium ];

  makeFlags = [ "CC=${stdenv.cc.targetPrefix}cc" "LIB_DIRS=common" ];
  buildFlags = [ "build/tentaflake-capsule-init" ];

  installPhase = ''
    runHook preInstall
    install -D -m 0755 build/tentaflake-capsule-init \
      $out/libexec/tentaflake-worker/tentaflake-capsule-init
    runHook postInstall
  '';
}
