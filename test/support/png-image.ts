/**
 * Reads a PNG as browsers write screenshots (8 bits per channel, RGB or RGBA, not interlaced) into
 * plain pixels, so a test can look at what a page looked like. Nothing else of PNG is supported.
 */
import { inflateSync } from 'node:zlib';

export interface PngImage {
  readonly width: number;
  readonly height: number;
  /** 3 (RGB) or 4 (RGBA). */
  readonly channels: number;
  /** Row after row, `channels` bytes a pixel. */
  readonly pixels: Uint8Array;
}

const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** Decodes `bytes`; throws naming what it does not support. */
export function decodePng(bytes: Buffer): PngImage {
  if (!bytes.subarray(0, 8).equals(SIGNATURE)) throw new Error('not a PNG');
  let width = 0;
  let height = 0;
  let channels = 0;
  const data: Buffer[] = [];
  for (let at = 8; at < bytes.length;) {
    const length = bytes.readUInt32BE(at);
    const type = bytes.toString('latin1', at + 4, at + 8);
    const body = bytes.subarray(at + 8, at + 8 + length);
    if (type === 'IHDR') {
      width = body.readUInt32BE(0);
      height = body.readUInt32BE(4);
      const [depth, color, , , interlace] = [body[8], body[9], body[10], body[11], body[12]];
      if (depth !== 8 || (color !== 2 && color !== 6) || interlace !== 0)
        throw new Error(`unsupported PNG: depth ${depth}, colour type ${color}, interlace ${interlace}`);
      channels = color === 6 ? 4 : 3;
    } else if (type === 'IDAT') data.push(body);
    else if (type === 'IEND') break;
    at += 12 + length;
  }
  const raw = inflateSync(Buffer.concat(data));
  const stride = width * channels;
  const pixels = new Uint8Array(height * stride);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)] ?? -1;
    const line = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    const out = y * stride;
    for (let x = 0; x < stride; x++) {
      const left = x >= channels ? (pixels[out + x - channels] as number) : 0;
      const up = y > 0 ? (pixels[out - stride + x] as number) : 0;
      const upLeft = y > 0 && x >= channels ? (pixels[out - stride + x - channels] as number) : 0;
      const v = line[x] as number;
      let predicted: number;
      switch (filter) {
        case 0:
          predicted = 0;
          break;
        case 1:
          predicted = left;
          break;
        case 2:
          predicted = up;
          break;
        case 3:
          predicted = (left + up) >> 1;
          break;
        case 4: {
          const p = left + up - upLeft;
          const pa = Math.abs(p - left);
          const pb = Math.abs(p - up);
          const pc = Math.abs(p - upLeft);
          predicted = pa <= pb && pa <= pc ? left : pb <= pc ? up : upLeft;
          break;
        }
        default:
          throw new Error(`unknown PNG filter ${String(filter)} on row ${y}`);
      }
      pixels[out + x] = (v + predicted) & 0xff;
    }
  }
  return { width, height, channels, pixels };
}

/** The rows (y) holding at least one pixel within `tolerance` of the colour `rgb`. */
export function rowsWithColour(
  image: PngImage,
  rgb: readonly [number, number, number],
  tolerance = 6,
): number[] {
  const rows: number[] = [];
  for (let y = 0; y < image.height; y++) {
    for (let x = 0; x < image.width; x++) {
      const i = (y * image.width + x) * image.channels;
      if (
        Math.abs((image.pixels[i] as number) - rgb[0]) <= tolerance &&
        Math.abs((image.pixels[i + 1] as number) - rgb[1]) <= tolerance &&
        Math.abs((image.pixels[i + 2] as number) - rgb[2]) <= tolerance
      ) {
        rows.push(y);
        break;
      }
    }
  }
  return rows;
}

/** Groups sorted row numbers into bands of adjacent rows (a gap of more than `gap` starts a new band). */
export function bands(rows: readonly number[], gap = 4): Array<{ from: number; to: number }> {
  const out: Array<{ from: number; to: number }> = [];
  for (const y of rows) {
    const last = out[out.length - 1];
    if (last !== undefined && y - last.to <= gap) last.to = y;
    else out.push({ from: y, to: y });
  }
  return out;
}
