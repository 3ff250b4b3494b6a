import time
from pathlib import Path
import torch
from bertattn_bench.engine.model import load_model
from bertattn_bench.data import blimp
from bertattn_bench.training import blimp_number as bn
t0=time.time()
loaded=load_model()
data=Path('/work/shared/data')
a=blimp.agreement(data)
print('load',time.time()-t0, torch.get_num_threads())
t0=time.time()
ft=bn.finetuned(loaded,a,'quick',0,data,Path('/work/cache-wt63b'))
print('train',time.time()-t0, ft.cached, ft.meta.get('train_seconds'), ft.meta['log']['loss_per_epoch'])
rec=bn.RECIPES['quick']
for name,s in (('test',a.test),('hard',a.hard)):
    t0=time.time()
    c=bn.learning_check(loaded,ft,bn.encode(loaded,s,rec),0)
    print(name,c.learned,c.text,time.time()-t0)
