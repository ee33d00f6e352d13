import Darkroom
import DarkroomTesting
import Foundation
import Testing

/// Decodes `data` with the real decoder and returns the error it throws (nil when it decodes).
private func decodeError(_ data: Data, _ name: String, decoder: ImageDecoder = ImageDecoder()) -> PipelineError? {
  do {
    _ = try decoder.decode(HostileFiles.fetched(data, name)).image.materialized()
    return nil
  } catch {
    return error
  }
}

@Suite("Decode bombs: memory is bounded by the limits, not by what a file declares")
struct DecodeBombTests {
  @Test(
    "a PNG metadata chunk declaring 2 GiB is refused before libpng allocates it",
    arguments: ["tEXt", "zTXt", "iTXt", "iCCP", "eXIf", "sPLT", "zzZz"])
  func hugeDeclaredChunk(_ type: String) {
    let lie = HostileFiles.pngChunk(type, Data("key\0\0\0text".utf8), declaredLength: 0x7FFF_0000)
    let error = decodeError(HostileFiles.png(width: 4, height: 4, before: [lie]), "\(type).png")
    #expect(error?.code == .corruptImage)
    #expect(error?.message.contains("\"\(type)\"") == true, "\(String(describing: error))")
    #expect(error?.message.contains("2147418112 bytes") == true, "\(String(describing: error))")
  }

  @Test("compressed PNG metadata counts decompressed against the metadata budget")
  func inflatingMetadata() {
    // 40 MB of text compressed into ~40 KB: present in full, so only its inflated size can tell.
    var body = Data("Comment\0\0".utf8)
    body.append(HostileFiles.deflate(Data(count: 40 << 20)))
    #expect(body.count < 100_000)
    let bomb = HostileFiles.png(width: 4, height: 4, before: [HostileFiles.pngChunk("zTXt", body)])
    let error = decodeError(bomb, "ztxt-bomb.png")
    #expect(error?.code == .imageTooLarge)
    #expect(error?.message.contains("metadata") == true, "\(String(describing: error))")
    // A normal amount of metadata decodes.
    var small = Data("Comment\0\0".utf8)
    small.append(HostileFiles.deflate(Data(repeating: 65, count: 100_000)))
    #expect(decodeError(HostileFiles.png(width: 4, height: 4, before: [HostileFiles.pngChunk("zTXt", small)]), "ok.png") == nil)
  }

  @Test("thousands of small PNG metadata chunks are refused")
  func manyChunks() {
    let chunk = HostileFiles.pngChunk("tEXt", Data("k\0v".utf8))
    let error = decodeError(
      HostileFiles.png(width: 4, height: 4, before: Array(repeating: chunk, count: ImageDecoder.maxMetadataChunks + 1)),
      "chunks.png")
    #expect(error?.code == .imageTooLarge)
  }

  @Test(
    "a PNG header declaring billions of pixels is imageTooLarge, however large (not corruptImage)",
    arguments: [(100_000, 100_000), (20_000_000, 20_000_000), (0x7FFF_FFFF, 0x7FFF_FFFF), (0x7FFF_FFFF, 1)])
  func declaredPixels(_ size: (Int, Int)) {
    let error = decodeError(HostileFiles.png(width: size.0, height: size.1, rows: 1), "huge.png")
    #expect(error?.code == .imageTooLarge, "\(String(describing: error))")
    #expect(error?.message.contains("\(size.0)×\(size.1)") == true, "\(String(describing: error))")
  }

  @Test("an animated WebP's canvas counts against the limits; frames must lie on it")
  func animatedWebP() {
    // 92-ish bytes, a 9000×9000 canvas (inside maxPixels, but held whole: 324 MB).
    let canvas = HostileFiles.animatedWebP(width: 9000, height: 9000, frames: 2)
    #expect(canvas.count < 200)
    let error = decodeError(canvas, "canvas.webp")
    #expect(error?.code == .imageTooLarge)
    #expect(error?.message.contains("canvas") == true, "\(String(describing: error))")
    let huge = decodeError(HostileFiles.animatedWebP(width: 16383, height: 16383), "huge.webp")
    #expect(huge?.code == .imageTooLarge)
    let outside = decodeError(HostileFiles.animatedWebP(width: 64, height: 64, frameX: 100), "outside.webp")
    #expect(outside?.code == .corruptImage, "\(String(describing: outside))")
    let frames = decodeError(HostileFiles.animatedWebP(width: 8, height: 8, frames: ImageDecoder.maxFrames + 1), "frames.webp")
    #expect(frames?.code == .imageTooLarge)
    #expect(frames?.message.contains("frames") == true)
    // A small animation decodes (its first frame).
    #expect(decodeError(HostileFiles.animatedWebP(width: 64, height: 64, frames: 3), "ok.webp") == nil)
  }

  @Test("a TIFF strip or tile counts against the limits before libvips allocates it")
  func tiffStrips() {
    let tiny = HostileFiles.deflate(Data(count: 4096))
    // 1,000,000 × 100 RGBA 16-bit, one strip of 100 rows: 800 MB decoded at once (measured: 972 MB RSS).
    let wide = HostileFiles.tiff(
      width: 1_000_000, height: 100, samples: 4, bits: 16, compression: 8, rowsPerStrip: 100, data: tiny)
    #expect(wide.count < 4096)
    let wideError = decodeError(wide, "wide.tiff")
    #expect(wideError?.code == .imageTooLarge, "\(String(describing: wideError))")
    #expect(wideError?.message.contains("strip") == true)
    // 100,000 × 100: 80 MB from a few stored bytes: more than deflate can hold.
    let implausible = HostileFiles.tiff(
      width: 100_000, height: 100, samples: 4, bits: 16, compression: 8, rowsPerStrip: 100, data: tiny)
    let implausibleError = decodeError(implausible, "implausible.tiff")
    #expect(implausibleError?.code == .corruptImage, "\(String(describing: implausibleError))")
    // A tile larger than maxPixels.
    let tile = HostileFiles.tiff(width: 16, height: 16, samples: 4, bits: 16, compression: 8, tile: (65536, 65536), data: tiny)
    #expect(decodeError(tile, "tile.tiff")?.code == .imageTooLarge)
    // JPEG-compressed strips (no bound on their ratio) decoded whole: the buffer budget.
    let jpeg = HostileFiles.tiff(width: 1_000_000, height: 100, compression: 7, rowsPerStrip: 100, data: tiny)
    #expect(decodeError(jpeg, "jpeg.tiff")?.code == .imageTooLarge)
    // A plain uncompressed TIFF decodes.
    #expect(decodeError(HostileFiles.gradientTIFF(width: 64, height: 48), "ok.tiff") == nil)
  }

  @Test("a GIF with thousands of frames is imageTooLarge and says why")
  func gifFrames() {
    let error = decodeError(HostileFiles.gif(width: 100, height: 100, frames: 20_000), "frames.gif")
    #expect(error?.code == .imageTooLarge, "\(String(describing: error))")
    #expect(error?.message.contains("more than \(ImageDecoder.maxFrames) frames") == true, "\(String(describing: error))")
    // Up to the limit, the first frame decodes; the whole animation is over the default maxFrames.
    let most = HostileFiles.gif(width: 100, height: 100, frames: ImageDecoder.maxFrames)
    #expect(decodeError(most, "ok.gif", decoder: ImageDecoder(animated: false)) == nil)
    #expect(decodeError(most, "ok.gif")?.message.contains("maxFrames") == true)
  }

  @Test("the guard reads a large local file with pread, not whole")
  func guardOnFiles() async throws {
    let folder = NSTemporaryDirectory() + "darkroom-guard-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: folder) }
    // Over 1 MiB (the streaming threshold): padding chunks first, then a lying tEXt.
    let padding = HostileFiles.pngChunk("zzPd", Data(count: 1 << 20))
    let lie = HostileFiles.pngChunk("tEXt", Data("a\0b".utf8), declaredLength: 0x7FFF_0000)
    let path = folder + "/large.png"
    try HostileFiles.png(width: 4, height: 4, before: [padding, lie]).write(to: URL(fileURLWithPath: path))
    let fetched = try await StageHarness().run(Fetcher(), on: ImageSource(path: path))
    #expect(fetched.bytes.streamingDescriptor != nil)
    #expect(throws: PipelineError.self) { try ImageDecoder().decode(fetched) }
    do {
      _ = try ImageDecoder().decode(fetched)
    } catch {
      #expect(error.code == .corruptImage)
      #expect(error.message.contains("\"tEXt\""))
    }
  }
}
