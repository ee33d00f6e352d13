import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

extension TrustedCertificates {
  /// The most entries read from a `caPath` directory (a system's `/etc/ssl/certs` has a few hundred).
  public static let maxDirectoryEntries = 10_000

  /// Reads a PEM bundle of CA certificates (a pipeline's `caFile`).
  ///
  /// The file is read like a local source: with `roots`, its path must resolve inside every root
  /// and it is opened beneath them with no symbolic link followed (`openat2`); without, any
  /// readable path. It must be a regular file (a FIFO, device or directory is refused without
  /// being read) of at most ``maxBytes``.
  ///
  /// ```swift
  /// let authorities = try TrustedCertificates.file("/srv/config/ca.pem", roots: ["/srv/config"])
  /// ```
  ///
  /// - Throws: `PipelineError` (`notFound`, `accessDenied`, `invalidInput`, `tooLarge`) whose
  ///   message starts with `caFile`.
  public static func file(_ path: String, roots: [String]) throws -> TrustedCertificates {
    var authorities = try named("caFile") { try read(path, roots: roots) }
    authorities.origin = "caFile \(path)"
    return authorities
  }

  /// Reads every certificate of an OpenSSL hashed directory (a pipeline's `caPath`).
  ///
  /// The entries named like OpenSSL's lookup names (`<8 hex digits>.<n>`, what `openssl rehash`
  /// and `c_rehash` make) are read, each as by ``file(_:roots:)``: such entries are usually
  /// symbolic links, followed only where they resolve inside the roots. Other names (`*.pem`
  /// originals, `.r0` CRLs) are left out, so that no certificate is read twice. The hash in a
  /// name is not checked: every certificate read is trusted. The directory is read once, when
  /// the pipeline loads; certificates added later are not seen.
  ///
  /// ```swift
  /// let authorities = try TrustedCertificates.directory("/srv/config/ca.d", roots: ["/srv/config"])
  /// ```
  ///
  /// - Throws: `PipelineError` whose message starts with `caPath`.
  public static func directory(_ path: String, roots: [String]) throws -> TrustedCertificates {
    try named("caPath") {
      let (descriptor, resolved) = try openDirectory(path, roots: roots)
      let names = try hashedNames(in: descriptor, path: path)
      guard !names.isEmpty else {
        throw PipelineError(
          .invalidInput,
          "\(path) holds no file named like OpenSSL's hashed names (<8 hex digits>.0): "
            + "run `openssl rehash \(path)`, or name a bundle with caFile")
      }
      var bundle: [UInt8] = []
      for name in names {
        let entry = try read(resolved + "/" + name, roots: roots)
        guard bundle.count + entry.pem.count <= maxBytes else {
          throw PipelineError(
            .tooLarge, "the certificates in \(path) take more than \(maxBytes) bytes together; trust fewer authorities")
        }
        bundle += entry.pem
      }
      return try TrustedCertificates(pem: bundle, origin: "caPath \(path)")
    }
  }

  /// Runs `body`, starting the message of any error with `option` (`caFile: …`).
  private static func named<T>(_ option: String, _ body: () throws -> T) throws -> T {
    do {
      return try body()
    } catch var error as PipelineError {
      error.message = "\(option): " + error.message
      error.source = nil
      throw error
    }
  }

  private static func read(_ path: String, roots: [String]) throws -> TrustedCertificates {
    let pem = try FileTransport.readSmallFile(
      path, roots: roots, wanted: "a PEM file of CA certificates", limit: maxBytes,
      limitName: "the limit for certificate authorities"
    ) { size in
      PipelineError(.tooLarge, "\(path) is \(size) bytes, over the limit of \(maxBytes) bytes for certificate authorities")
    }
    return try TrustedCertificates(pem: pem, origin: path)
  }

  /// Opens the directory `path` (beneath the roots, when there are some); returns its descriptor
  /// and resolved path.
  private static func openDirectory(_ path: String, roots: [String]) throws -> (Int32, String) {
    guard !path.isEmpty else { throw PipelineError(.invalidInput, "the path is empty") }
    let descriptor: Int32
    let resolved: String
    if roots.isEmpty {
      descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
      guard descriptor >= 0 else { throw FileTransport.openError(path, shown: path) }
      resolved = FileTransport.realPath("/proc/self/fd/\(descriptor)") ?? path
    } else {
      (descriptor, resolved) = try FileTransport.openConfined(path, roots: roots, shown: path)
    }
    var status = stat()
    guard fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFDIR else {
      close(descriptor)
      throw PipelineError(
        .invalidInput, "\(path) is not a directory; name a folder of hashed certificates, or a PEM bundle with caFile")
    }
    return (descriptor, resolved)
  }

  /// The hashed names in the open directory, sorted (the descriptor is closed).
  private static func hashedNames(in descriptor: Int32, path: String) throws -> [String] {
    guard let directory = fdopendir(descriptor) else {
      close(descriptor)
      throw PipelineError(.fetchFailed, "\(path) cannot be listed: \(String(cString: strerror(errno)))")
    }
    defer { closedir(directory) }
    var names: [String] = []
    var seen = 0
    while let entry = readdir(directory) {
      seen += 1
      guard seen <= maxDirectoryEntries else {
        throw PipelineError(.tooLarge, "\(path) has more than \(maxDirectoryEntries) entries; trust fewer authorities")
      }
      let name = withUnsafePointer(to: &entry.pointee.d_name) {
        String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self))
      }
      if isHashedName(name) { names.append(name) }
    }
    return names.sorted()
  }

  /// Whether `name` is an OpenSSL lookup name for a certificate: 8 lower-case hex digits, a dot,
  /// and a decimal sequence number.
  package static func isHashedName(_ name: String) -> Bool {
    let parts = name.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count == 2, parts[0].utf8.count == 8, (1...3).contains(parts[1].utf8.count) else { return false }
    return parts[0].utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
      && parts[1].utf8.allSatisfy { (0x30...0x39).contains($0) }
  }
}
