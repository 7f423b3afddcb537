// The privacy rule on session descriptions, as `veil call` and the room server apply it.

/**
 * Why a remote session description may not be applied, or null: the rule `veil call` and the room
 * server apply (VeilCore `SessionDescriptionMedia`). Every line must be strict SDP, one lower-case
 * letter, `=`, a value, with no control character (a lenient parser could otherwise read ` m=video`
 * or `M=video` as a video section), and the sections are one audio section and one data channel.
 */
export function sessionDescriptionRefusal(sdp) {
  if (typeof sdp !== 'string' || sdp.length > 65536) return 'the session description is missing or too long';
  const lines = sdp.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  let audio = 0, data = 0;
  for (const [index, raw] of lines.entries()) {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (!/^[a-z]=/.test(line) || /[\u0000-\u0008\u000a-\u001f\u007f\u0085\u2028\u2029]/.test(line)) {
      return `line ${index + 1} of the session description is not strict SDP`;
    }
    if (!line.startsWith('m=')) continue;
    const fields = line.slice(2).split(' ');
    if (fields.length < 3 || fields.slice(0, 3).some((f) => f === '')) return `line ${index + 1} is a malformed m= line`;
    if (fields[0] === 'audio') audio += 1;
    else if (fields[0] === 'application' && fields[2].includes('SCTP')) data += 1;
    else return `the session description has an m=${fields[0].slice(0, 20)} section`;
    if (audio > 1 || data > 1) return 'the session description has a second audio or data section';
  }
  return null;
}
