import { describe, expect, it } from 'vitest';
import { controlActivitySlots } from '../../workers/worker.js';

describe('controlActivitySlots: how many activities a control worker runs at once', () => {
  it('2,048 by default, far above the SDK\'s 100 (a generate activity waits out an engine\'s whole answer)', () => {
    expect(controlActivitySlots({})).toBe(2048);
    expect(controlActivitySlots({ FLOE_CONTROL_ACTIVITY_SLOTS: '' })).toBe(2048);
  });
  it('FLOE_CONTROL_ACTIVITY_SLOTS overrides it; a value that is not a positive integer is refused with the fix', () => {
    expect(controlActivitySlots({ FLOE_CONTROL_ACTIVITY_SLOTS: '300' })).toBe(300);
    for (const bad of ['0', '-4', '1.5', 'many']) {
      expect(() => controlActivitySlots({ FLOE_CONTROL_ACTIVITY_SLOTS: bad })).toThrow(/FLOE_CONTROL_ACTIVITY_SLOTS must be a positive integer.*unset it/);
    }
  });
});
