import Darkroom
import DarkroomTesting
import DarkroomVipsTesting
import Foundation
import Testing

/// Large local files (≥ 1 MiB) are decoded from the file itself, not from a copy in memory.
@Suite("Decoding large files from the file", .serialized)
struct StreamingDecodeTests {
  let folder = NSTemporaryDirectory() + "darkroom-streaming-\(UUID().uuidString)"

  /// A noisy 1600×1200 JPEG at quality 95: noise keeps it well over the 1 MiB threshold.
  static let largeJPEG: ImageBytes = {
    var generator = SplitMix(seed: 7)
    let pixels = (0..<(1600 * 1200 * 3)).map { index in
      UInt8(truncatingIfNeeded: (index / 4800) &+ Int(generator.next() % 48))
    }
    let image = try! VipsImage.fromPixels(pixels, width: 1600, height: 1200, bands: 3)
    let decoded = DecodedImage(
      source: ImageSource("memory"), image: image, sourceFormat: .png, sourceWidth: 1600, sourceHeight: 1200)
    return try! ImageEncoder(.jpeg(quality: 95)).encode(decoded).bytes
  }()

  init() throws {
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
  }

  func fetch(_ path: String) async throws -> FetchedData {
    try await StageHarness().run(Fetcher(), on: ImageSource(path: path))
  }

  func thumbnail(_ input: FetchedData, size: Int = 300) async throws -> EncodedImage {
    let pipeline = Pipeline(name: "thumb") {
      ImageDecoder()
      Resizer(width: size, height: size, mode: .fit)
      ImageEncoder(.png())
    }
    return try await pipeline.process(input)
  }

  @Test("a large file is decoded from the file, with exactly the pixels decoding it from memory gives")
  func sameAsMemory() async throws {
    #expect(Self.largeJPEG.count > FileTransport.streamingThreshold)
    let path = try TestImages.write(Self.largeJPEG, named: "large.jpg", in: folder)
    let fetched = try await fetch(path)
    #expect(fetched.bytes.streamingDescriptor != nil, "read into memory")
    #expect(fetched.bytes.count == Self.largeJPEG.count)
    #expect(fetched.contentType == "image/jpeg")
    let inMemory = FetchedData(source: fetched.source, bytes: ImageBytes(Self.largeJPEG.data))
    let fromFile = try await thumbnail(fetched)
    let fromMemory = try await thumbnail(inMemory)
    #expect(fromFile.bytes == fromMemory.bytes)
    #expect(fetched.bytes.streamingDescriptor != nil, "the decode read the whole file into memory")
    // A full decode (no shrink on load) too.
    let full = try ImageDecoder().decode(fetched).materializedForTest()
    let reference = try ImageDecoder().decode(inMemory).materializedForTest()
    #expect(try meanDifference(full.image, reference.image) == 0)
  }

  @Test("small files are read into memory")
  func smallFilesInMemory() async throws {
    let path = try TestImages.write(try TestImages.encoded(.jpeg(), width: 64, height: 48), named: "small.jpg", in: folder)
    let fetched = try await fetch(path)
    #expect(fetched.bytes.streamingDescriptor == nil)
  }

  @Test("the file that was checked is the file that is read, whatever happens to its path")
  func pathSwappedAfterFetch() async throws {
    let path = try TestImages.write(Self.largeJPEG, named: "swap.jpg", in: folder)
    let fetched = try await fetch(path)
    // Replace the path with another image, then with a symlink to somewhere else.
    try FileManager.default.removeItem(atPath: path)
    _ = try TestImages.write(try TestImages.encoded(.png(), width: 10, height: 10), named: "swap.jpg", in: folder)
    try FileManager.default.removeItem(atPath: path)
    try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: "/etc/hostname")
    let decoded = try ImageDecoder().decode(fetched)
    #expect(decoded.width == 1600 && decoded.height == 1200)
    #expect(try await thumbnail(fetched).width == 300)
  }

  @Test("a large file cut short fails strictly as corruptImage, and decodes partially when lenient")
  func truncated() async throws {
    let whole = Self.largeJPEG.data
    let cut = ImageBytes(whole.prefix(whole.count * 2 / 3))
    #expect(cut.count > FileTransport.streamingThreshold)
    let path = try TestImages.write(cut, named: "cut.jpg", in: folder)
    let fetched = try await fetch(path)
    #expect(fetched.bytes.streamingDescriptor != nil)
    await #expect {
      _ = try await thumbnail(fetched)
    } throws: { error in
      (error as? PipelineError)?.code == .corruptImage
    }
    let lenient = try ImageDecoder(lenient: true).decode(fetched)
    #expect(lenient.partial)
  }

  @Test("past maxOpenFiles large files in flight, files are read into memory: descriptors stay bounded")
  func boundedDescriptors() async throws {
    let path = try TestImages.write(Self.largeJPEG, named: "many.jpg", in: folder)
    var held: [FetchedData] = []
    for _ in 0..<(ImageBytes.maxOpenFiles + 5) { held.append(try await fetch(path)) }
    #expect(ImageBytes.openFiles <= ImageBytes.maxOpenFiles)
    #expect(held.filter { $0.bytes.streamingDescriptor != nil }.count <= ImageBytes.maxOpenFiles)
    let inMemory = try #require(held.last)
    #expect(inMemory.bytes.streamingDescriptor == nil)
    #expect(inMemory.bytes == Self.largeJPEG)
    held.removeAll()
    #expect(ImageBytes.openFiles == 0)
    #expect(try await fetch(path).bytes.streamingDescriptor != nil)
  }

  @Test("concurrent decodes of one large file at different sizes do not disturb one another")
  func concurrentReaders() async throws {
    let path = try TestImages.write(Self.largeJPEG, named: "shared.jpg", in: folder)
    let fetched = try await fetch(path)
    let inMemory = FetchedData(source: fetched.source, bytes: ImageBytes(Self.largeJPEG.data))
    let sizes = [100, 150, 200, 250, 300, 400, 600, 800]
    var expected: [Int: ImageBytes] = [:]
    for size in sizes { expected[size] = try await thumbnail(inMemory, size: size).bytes }
    try await withThrowingTaskGroup(of: (Int, ImageBytes).self) { group in
      for size in sizes + sizes { group.addTask { (size, try await thumbnail(fetched, size: size).bytes) } }
      for try await (size, bytes) in group { #expect(bytes == expected[size], "size \(size)") }
    }
  }
}

/// A small deterministic generator (SplitMix64) for test noise.
struct SplitMix {
  private var state: UInt64
  init(seed: UInt64) { state = seed }
  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}
