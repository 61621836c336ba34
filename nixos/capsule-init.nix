# tentaflake-capsule-init, the capsule's static pid 1, built with pkgsStatic (musl):
#   pkgsStatic.callPackage ./capsule-init.nix { src = ...; version = ...; }
# It links objects of common/ and capsule/ (the layer diff, its own drop and seccomp filter) with
# libarchive and libseccomp; capsule/ compiles against jansson, OpenSSL and libsodium headers, so
# those are inputs too, though the static link keeps only what the init calls.
{ stdenv, pkg-config, libarchive, libseccomp, jansson, openssl, libsodium, src, version }:
stdenv.mkDerivation {
  pname = "tentaflake-capsule-init";
  inherit version src;

  nativeBuildInputs = [ pkg-config ];
  buildInputs = [ libarchive libseccomp jansson openssl libsodium ];

  makeFlags = [ "CC=${stdenv.cc.targetPrefix}cc" ];
  # A value with a space: a makeFlags list would be split on it.
  preBuild = ''
    makeFlagsArray+=("LIB_DIRS=common capsule")
  '';
  buildFlags = [ "build/tentaflake-capsule-init" ];

  installPhase = ''
    runHook preInstall
    install -D -m 0755 build/tentaflake-capsule-init \
      $out/libexec/tentaflake-worker/tentaflake-capsule-init
    runHook postInstall
  '';
}
