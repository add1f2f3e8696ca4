import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/** Custom search attributes floe sets on its workflows, so the Web UI can filter and show
 *  runs by id, policy version and reward. Registered by `floe up` (dev server) or by an
 *  operator on a cluster (`temporal operator search-attribute create`). */
export const SEARCH_ATTRIBUTES = {
  FloeRunId: 'Keyword',
  FloeKind: 'Keyword',
  FloePolicyVersion: 'Int',
  FloeMeanReward: 'Double',
  FloeTaskId: 'Keyword',
} as const;

export const FloeRunId = defineSearchAttributeKey('FloeRunId', SearchAttributeType.KEYWORD);
export const FloeKind = defineSearchAttributeKey('FloeKind', SearchAttributeType.KEYWORD);
export const FloePolicyVersion = defineSearchAttributeKey('FloePolicyVersion', SearchAttributeType.INT);
export const FloeMeanReward = defineSearchAttributeKey('FloeMeanReward', SearchAttributeType.DOUBLE);
export const FloeTaskId = defineSearchAttributeKey('FloeTaskId', SearchAttributeType.KEYWORD);
